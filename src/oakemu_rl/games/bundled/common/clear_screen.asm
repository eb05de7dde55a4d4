; ============================================================================
;  clear_screen - shared by the bundled games (INCLUDEd where each game had
;  its own copy, so the games assemble to the same bytes as before).
;  Needs: attr_base (0x5800) defined by the game.
; ============================================================================

; clear_screen: empty bitmap, every attribute = A
;      in: A = attribute; keeps A; clobbers BC, DE, HL
clear_screen:
        ld hl, 0x4000
        ld de, 0x4001
        ld bc, 6143
        ld (hl), 0
        ldir
        ld hl, attr_base
        ld de, attr_base + 1
        ld bc, 767
        ld (hl), a
        ldir
        ret
