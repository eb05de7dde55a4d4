; ============================================================================
;  isr - the IM 2 interrupt handler shared by the bundled games (INCLUDEd
;  where each game had its own copy, so the games assemble to the same bytes
;  as before). Each game points its IM 2 vector table's jump at `isr`.
;  Needs: the word variable frames.
; ============================================================================

; isr: count one frame in (frames) (wraps at 65536); keeps every register,
;      re-enables interrupts and returns with RETI
isr:
        push af
        push hl
        ld hl, (frames)
        inc hl
        ld (frames), hl
        pop hl
        pop af
        ei
        reti
