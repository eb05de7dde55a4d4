; ============================================================================
;  print_list - shared by the bundled games (INCLUDEd where each game had its
;  own copy, so the games assemble to the same bytes as before).
;  Needs: print_at (common/print_at.asm).
; ============================================================================

; print_list: IX -> records (row, column, colour, text..., 0), ended by a 0xFF row
;      IX ends on the 0xFF; clobbers A, BC, HL (and text_attr); keeps DE
print_list:
        ld a, (ix + 0)
        cp 0xFF
        ret z
        ld b, a
        ld c, (ix + 1)
        ld a, (ix + 2)
        push ix
        pop hl
        inc hl
        inc hl
        inc hl
        call print_at
        inc hl
        push hl
        pop ix
        jr print_list
