; ============================================================================
;  print_at - shared by the bundled games (INCLUDEd where each game had its
;  own copy, so the games assemble to the same bytes as before).
;  Needs: the byte variable text_attr and the game's print_char.
; ============================================================================

; print_at: HL = zero-terminated text, B = row, C = column, A = colour
;      HL ends on the 0, C one past the last character, A = 0;
;      sets (text_attr) = the colour; keeps B, DE
print_at:
        ld (text_attr), a
_next:  ld a, (hl)
        or a
        ret z
        call print_char
        inc hl
        inc c
        jr _next
