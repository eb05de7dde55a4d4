; ============================================================================
;  inc_digits - shared by the bundled games that keep numbers as ASCII digits
;  (INCLUDEd where each game had its own copy, so the games assemble to the
;  same bytes as before).
; ============================================================================

; inc_digits: add 1 to the ASCII number whose last digit is at HL
;      B = number of digits (up to and including the one at HL); a carry out
;      of the first digit is dropped (9999 + 1 = 0000)
;      clobbers A, B, HL; keeps C, DE
inc_digits:
        ld a, (hl)
        inc a
        cp "9" + 1
        jr c, _store
        ld (hl), "0"
        dec hl
        djnz inc_digits
        ret
_store: ld (hl), a
        ret
