; ============================================================================
;  print_char - shared by the bundled games that draw a character straight
;  from the ROM font (INCLUDEd where each game had its own copy, so the games
;  assemble to the same bytes as before). Games that draw through a glyph
;  routine of their own keep their own print_char.
;  Needs: the byte variable text_attr and attr_addr (common/attr_addr.asm).
; ============================================================================

; print_char: character A at row B, column C in colour (text_attr); keeps BC DE HL
;      the glyph is the ROM character set's (HL = 0x3C00 + 8 * A; 0x3D00 is
;      the space); clobbers A and the flags
print_char:
        push hl
        push de
        push bc
        ld l, a                     ; HL = 0x3C00 + 8 * A (ROM character set)
        ld h, 0
        add hl, hl
        add hl, hl
        add hl, hl
        ld de, 0x3C00
        add hl, de
        ex de, hl                   ; DE = glyph
        ld a, b                     ; HL = bitmap address of the cell
        and 0x18
        or 0x40
        ld h, a
        ld a, b
        and 7
        rrca
        rrca
        rrca
        or c
        ld l, a
        ld b, 8
_line:  ld a, (de)
        ld (hl), a
        inc de
        inc h
        djnz _line
        pop bc
        push bc
        call attr_addr
        ld a, (text_attr)
        ld (hl), a
        pop bc
        pop de
        pop hl
        ret
