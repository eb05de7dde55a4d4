; ============================================================================
;  rnd - the xorshift16 random number generator shared by the bundled games
;  (INCLUDEd where each game had its own copy, so the games assemble to the
;  same bytes as before).
;  Needs: the word variable rng_seed (the live state) and the constant
;  rnd_zero_seed, set by the game before the INCLUDE (its default seed).
; ============================================================================

; rnd: xorshift16 step of (rng_seed); returns A (= H) and HL (the new state)
;      a zero state would stick, so it is first replaced by rnd_zero_seed
;      clobbers the flags; keeps BC, DE
rnd:
        ld hl, (rng_seed)
        ld a, h
        or l
        jr nz, _go
        ld hl, rnd_zero_seed        ; a zero state would stick; use the default
_go:    ld a, h
        rra
        ld a, l
        rra
        xor h
        ld h, a
        ld a, l
        rra
        ld a, h
        rra
        xor l
        ld l, a
        xor h
        ld h, a
        ld (rng_seed), hl
        ret
