; ============================================================================
;  print_n - shared by the bundled games (INCLUDEd where each game had its own
;  copy, so the games assemble to the same bytes as before).
;  Needs: the byte variable text_attr and the game's print_char.
; ============================================================================

; print_n: E characters from HL at row B, column C, colour (attribute) A
;      HL ends one past the last character, C one past its column, E = 0;
;      clobbers A; sets (text_attr) = the colour; keeps B, D
print_n:
        ld (text_attr), a
_next:  ld a, (hl)
        call print_char
        inc hl
        inc c
        dec e
        jr nz, _next
        ret
