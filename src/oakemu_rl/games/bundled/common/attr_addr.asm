; ============================================================================
;  attr_addr - shared by the bundled games (INCLUDEd where each game had its
;  own copy, so the games assemble to the same bytes as before).
;  Needs: attr_base (0x5800) defined by the game.
; ============================================================================

; attr_addr: B = row, C = column -> HL = attribute address
;      clobbers A; keeps BC, DE
attr_addr:
        ld a, b
        rrca
        rrca
        rrca
        ld l, a
        and 3
        or attr_base / 256
        ld h, a
        ld a, l
        and 0xE0
        or c
        ld l, a
        ret
