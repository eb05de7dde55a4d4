; ============================================================================
;  read_input (keys O, P, SPACE and a Kempston joystick) - shared by the
;  bundled games with those controls (INCLUDEd where each game had its own
;  copy, so the games assemble to the same bytes as before). Games with other
;  keys keep their own read_input.
; ============================================================================

; read_input: A = bit 0 right, 1 left, 2 down, 3 up, 4 fire
;      keyboard: P right, O left, SPACE fire; plus a Kempston joystick (its
;      bits are ORed in; a floating bus, no interface, is ignored)
;      clobbers BC and the flags; keeps DE, HL
read_input:
        ld c, 0
        ld a, 0xDF                  ; half-row P O I U Y
        in a, (0xFE)
        rra
        jr c, _no_p
        set 0, c
_no_p:  rra
        jr c, _no_o
        set 1, c
_no_o:  ld a, 0x7F                  ; half-row SPACE SYMSHIFT M N B
        in a, (0xFE)
        rra
        jr c, _no_sp
        set 4, c
_no_sp: ld a, 0
        in a, (0x1F)                ; Kempston: active high
        ld b, a
        and 0xE0                    ; no interface (floating bus): ignore it
        jr nz, _done
        ld a, b
        or c
        ld c, a
_done:  ld a, c
        ret
