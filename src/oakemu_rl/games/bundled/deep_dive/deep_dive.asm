; ============================================================================
;  DEEP DIVE - an original ZX Spectrum 48K game written for OakEmu-RL.
;
;  Swim down from the surface and bring up pearls. One pearl at a time lies
;  on the deep half of the sea, at a random cell far from the diver. The air
;  runs out under water and fills up again only at the surface, so every
;  pearl is a trip down and back. Three jellyfish drift across the water; a
;  sting costs one of three lives, and so does running out of air. A pearl
;  scores 10; twenty pearls win.
;
;  Keys: Q up, A down, O left, P right, two at once for the diagonals
;        (Kempston joystick too); SPACE (or fire) starts a game.
;
;  Assemble with pasmo:  pasmo --alocal --bin deep_dive.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in deep_dive.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness (where the pearls lie, where the jellyfish start
;  and how they bob) comes from the 16-bit xorshift state `rng_seed`, never
;  reseeded from anything else: the same seed and the same key presses
;  always give the same game.
;
;  Movement is on the 8x8 character grid: the diver moves one cell (in any
;  of 8 directions) every `move_period` frames while a direction is held; a
;  jellyfish drifts one column every `jelly_period` frames, turning back at
;  the screen's edges, and now and then bobs a row up or down. Screen row 1
;  is the air gauge (one cell per 4 units of air, red when low), row 2 the
;  surface, rows 3-22 the water and row 23 the sea bed. Under water the air
;  drops by one unit every 4 frames (one agent step at frame_skip 4); at the
;  surface it rises by 2 units a frame.
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800

start_lives     equ '3'
win_pearls      equ 20
move_period     equ 4               ; frames per diver step (one agent step at frame_skip 4)
jelly_period    equ 6               ; frames per jellyfish step
air_period      equ 4               ; frames per unit of air used under water
air_max         equ 112             ; 28 gauge cells of 4 units
air_low         equ 28              ; below this the gauge turns red
air_refill      equ 2               ; units a frame at the surface
hit_pause       equ 25              ; frames the stung diver is shown
num_jellies     equ 3
surface_row     equ 2
bottom_row      equ 22              ; the lowest row of water
pearl_top       equ 12              ; pearls lie on rows 12-22
pearl_distance  equ 14              ; at least this far (Manhattan) from the diver
jelly_top       equ 4               ; jellyfish stay on rows 4-22
diver_start_x   equ 15

; colours (attribute bytes)
col_water       equ 0x08            ; blue PAPER
col_surface     equ 0x29            ; blue ink on cyan PAPER: the waves
col_bed         equ 0x30            ; yellow PAPER: the sea bed
col_diver       equ 0x4E            ; bright yellow ink on blue
col_diver_up    equ 0x6E            ; bright yellow ink on cyan: the diver at the surface
col_pearl       equ 0x4F            ; bright white ink on blue
col_jelly       equ 0x4B            ; bright magenta ink on blue
col_hit         equ 0xCA            ; flashing red ink on blue: the diver is stung
col_air         equ 0x68            ; bright cyan PAPER: air in the gauge
col_air_low     equ 0x50            ; bright red PAPER: little air left
col_text        equ 0x47
col_title       equ 0x46
col_keys        equ 0x45
col_flash       equ 0xC7

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (deep_dive.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0xD1FE         ; 0x8000 live xorshift state (zero is replaced)
score:          defb "0000"         ; 0x8002 ASCII digits
lives:          defb "3"            ; 0x8006 ASCII digit
air:            defb 0              ; 0x8007 units of air left (0-112)
diver_x:        defb 0              ; 0x8008 column of the diver (0-31)
diver_y:        defb 0              ; 0x8009 row of the diver (2 at the surface, 3-22 under water)
pearl_x:        defb 0              ; 0x800A the pearl's cell
pearl_y:        defb 0              ; 0x800B
pearls:         defb 0              ; 0x800C pearls collected this game (binary)
lives_lost:     defb 0              ; 0x800D
stings:         defb 0              ; 0x800E lives lost to jellyfish
air_outs:       defb 0              ; 0x800F lives lost for want of air
move_timer:     defb 0              ; 0x8010
air_timer:      defb 0              ; 0x8011
jelly_timer:    defb 0              ; 0x8012
frames:         defw 0              ; 0x8013 frames counted by the interrupt
text_attr:      defb col_text       ; 0x8015
air_cells:      defb 0              ; 0x8016 scratch for the gauge

        org 0x8020
jellies:                            ; num_jellies records: x, y, dx (+1 or -1), spare
jelly1_x:       defb 0              ; 0x8020
jelly1_y:       defb 0              ; 0x8021
                defb 0, 0
jelly2_x:       defb 0              ; 0x8024
jelly2_y:       defb 0              ; 0x8025
                defb 0, 0
jelly3_x:       defb 0              ; 0x8028
jelly3_y:       defb 0              ; 0x8029
                defb 0, 0

; ----------------------------------------------------------------------------
;  Code
; ----------------------------------------------------------------------------
        org 0x8100
start:
        di
        ld sp, stack_top
        ld a, im2_table / 256
        ld i, a
        im 2
        xor a
        out (0xFE), a               ; black border
        ei

; ---- title screen: wait for SPACE / fire ----------------------------------
title:
        ld sp, stack_top
        xor a
        call clear_screen
        ld ix, title_texts
        call print_list
        ld b, 6                     ; the cast, drawn with the game's own glyphs
        ld c, 8
        ld de, glyph_diver
        ld a, col_diver
        call draw_glyph
        ld c, 15
        ld de, glyph_pearl
        ld a, col_pearl
        call draw_glyph
        ld c, 22
        ld de, glyph_jelly
        ld a, col_jelly
        call draw_glyph
title_wait:
        halt
        call read_input
        and 0x10
        jr z, title_wait

; ---- a new game -------------------------------------------------------------
new_game:
        ld hl, 0x3030               ; "00"
        ld (score), hl
        ld (score + 2), hl
        ld a, start_lives
        ld (lives), a
        xor a
        ld (pearls), a
        ld (lives_lost), a
        ld (stings), a
        ld (air_outs), a
        call clear_screen
        ld ix, hud_texts
        call print_list
        call draw_score
        call draw_lives
        ld b, surface_row           ; the sea
_row:   ld c, 0
_col:   call draw_cell
        inc c
        ld a, c
        cp 32
        jr nz, _col
        inc b
        ld a, b
        cp 24
        jr nz, _row
        ld ix, jellies              ; the jellyfish: random columns and ways,
        ld b, num_jellies           ; rows 7, 12 and 17
        ld c, 7
_jelly: call rnd
        and 31
        ld (ix + 0), a
        ld (ix + 1), c
        ld a, l
        and 1
        add a, a
        dec a                       ; -1 or +1
        ld (ix + 2), a
        ld de, 4
        add ix, de
        ld a, c
        add a, 5
        ld c, a
        djnz _jelly
        call reset_diver
        call new_pearl
        call draw_jellies
        ld a, jelly_period
        ld (jelly_timer), a

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        ld hl, move_timer
        dec (hl)
        jr nz, ml_jellies
        ld (hl), move_period
        call read_input
        call move_diver
        call check_sting
ml_jellies:
        ld hl, jelly_timer
        dec (hl)
        jr nz, ml_air
        ld (hl), jelly_period
        call move_jellies
        call check_sting
ml_air:
        ld a, (diver_y)
        cp surface_row
        jr nz, ml_under
        ld a, (air)                 ; at the surface: breathe
        cp air_max
        jr nc, main_loop
        add a, air_refill
        cp air_max
        jr c, _fill
        ld a, air_max
_fill:  ld (air), a
        call draw_air
        jp main_loop
ml_under:
        ld hl, air_timer
        dec (hl)
        jr nz, main_loop
        ld (hl), air_period
        ld hl, air
        dec (hl)
        push af
        call draw_air
        pop af
        jp z, out_of_air
        jp main_loop

; ---- events -----------------------------------------------------------------
pearl_collected:                    ; reached when the diver picks up a pearl
        ld hl, pearls
        inc (hl)
        ld hl, score + 2            ; 10 points
        ld b, 3
        call inc_digits
        call draw_score
        ld a, (pearls)
        cp win_pearls
        jp z, won
        jp new_pearl

stung:                              ; reached when a jellyfish and the diver meet
        ld hl, stings
        inc (hl)
        jr life_lost

out_of_air:                         ; reached when the air runs out under water
        ld hl, air_outs
        inc (hl)
        ; fall through

life_lost:                          ; reached when a sting or the want of air costs a life
        ld hl, lives_lost
        inc (hl)
        ld hl, lives
        dec (hl)
        call draw_lives
        ld a, col_hit               ; show the stricken diver
        call draw_diver_a
        ld a, (lives)
        cp "0"
        jp z, game_over
        ld b, hit_pause
_pause: halt
        djnz _pause
        call erase_diver
        call reset_diver
        call draw_jellies
        ld sp, stack_top
        jp main_loop

won:                                ; reached when the last pearl is collected
        ld sp, stack_top
        ld a, col_flash
        ld hl, txt_won1
        ld bc, 10 * 256 + 11
        call print_at
        ld a, col_text
        ld hl, txt_won2
        ld bc, 12 * 256 + 6
        call print_at
        ld b, 150
        jr end_wait

game_over:                          ; reached when the last life is lost
        ld sp, stack_top
        ld a, col_flash
        ld hl, txt_game_over
        ld bc, 11 * 256 + 11
        call print_at
        ld b, 100
end_wait:
        halt
        djnz end_wait
end_release:                        ; wait until SPACE/fire is up again
        halt
        call read_input
        and 0x10
        jr nz, end_release
        jp title

; ---- the diver ----------------------------------------------------------------------
; reset_diver: the diver at the surface with full air
reset_diver:
        ld a, diver_start_x
        ld (diver_x), a
        ld a, surface_row
        ld (diver_y), a
        ld a, air_max
        ld (air), a
        ld a, move_period
        ld (move_timer), a
        ld a, air_period
        ld (air_timer), a
        call draw_air
        jp draw_diver

erase_diver:
        ld hl, diver_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        jp draw_cell

; move_diver: A = input bits (0 right, 1 left, 2 down, 3 up); one cell that way,
;      each axis on its own, stopping at the edges, the surface and the sea bed
move_diver:
        ld e, a
        ld a, (diver_x)
        ld c, a
        ld a, (diver_y)
        ld b, a
        bit 0, e
        jr z, _nr
        ld a, c
        cp 31
        jr z, _nr
        inc c
_nr:    bit 1, e
        jr z, _nl
        ld a, c
        or a
        jr z, _nl
        dec c
_nl:    bit 2, e
        jr z, _nd
        ld a, b
        cp bottom_row
        jr z, _nd
        inc b
_nd:    bit 3, e
        jr z, _nu
        ld a, b
        cp surface_row
        jr z, _nu
        dec b
_nu:    ld hl, (diver_x)            ; L = x, H = y
        ld a, l
        cp c
        jr nz, _move
        ld a, h
        cp b
        ret z                       ; did not move
_move:  push bc
        call erase_diver
        pop bc
        ld a, c
        ld (diver_x), a
        ld a, b
        ld (diver_y), a
        call draw_diver
        ld hl, (diver_x)
        ld de, (pearl_x)
        or a
        sbc hl, de
        ret nz
        jp pearl_collected

draw_diver:
        ld a, (diver_y)
        cp surface_row
        ld a, col_diver
        jr nz, draw_diver_a
        ld a, col_diver_up
draw_diver_a:                       ; in colour A
        ld de, glyph_diver
        ld hl, diver_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        jp draw_glyph

; check_sting: a jellyfish in the diver's cell costs a life
check_sting:
        ld ix, jellies
        ld b, num_jellies
        ld hl, (diver_x)
_next:  ld a, (ix + 0)
        cp l
        jr nz, _miss
        ld a, (ix + 1)
        cp h
        jp z, stung
_miss:  ld de, 4
        add ix, de
        djnz _next
        ret

; ---- the pearl ---------------------------------------------------------------------
; new_pearl: a pearl on a random cell of rows 12-22, far from the diver
new_pearl:
        call rnd
        and 31
        ld c, a
_row:   call rnd
        and 15
        cp bottom_row - pearl_top + 1
        jr nc, _row
        add a, pearl_top
        ld b, a
        ld a, (diver_x)             ; Manhattan distance from the diver
        sub c
        jr nc, _dx
        neg
_dx:    ld d, a
        ld a, (diver_y)
        sub b
        jr nc, _dy
        neg
_dy:    add a, d
        cp pearl_distance
        jr c, new_pearl
        ld a, c
        ld (pearl_x), a
        ld a, b
        ld (pearl_y), a
        jp draw_cell

; ---- the jellyfish ---------------------------------------------------------------------
; move_jellies: each drifts a column (turning back at an edge) and may bob a row
move_jellies:
        ld ix, jellies
        ld b, num_jellies
_each:  push bc
        ld c, (ix + 0)
        ld b, (ix + 1)
        call draw_cell              ; erase it
        ld a, (ix + 0)
        add a, (ix + 2)
        cp 32                       ; off either edge (-1 is 255): turn back
        jr c, _x
        ld a, (ix + 2)
        neg
        ld (ix + 2), a
        add a, (ix + 0)
_x:     ld (ix + 0), a
        call rnd
        and 7
        jr nz, _nup                 ; 1 in 8: a row up
        ld a, (ix + 1)
        cp jelly_top
        jr z, _done
        dec (ix + 1)
        jr _done
_nup:   dec a
        jr nz, _done                ; 1 in 8: a row down
        ld a, (ix + 1)
        cp bottom_row
        jr z, _done
        inc (ix + 1)
_done:  ld de, 4
        add ix, de
        pop bc
        djnz _each
        ; fall through

draw_jellies:
        ld ix, jellies
        ld b, num_jellies
_each:  push bc
        ld c, (ix + 0)
        ld b, (ix + 1)
        ld de, glyph_jelly
        ld a, col_jelly
        call draw_glyph
        ld de, 4
        add ix, de
        pop bc
        djnz _each
        ret

; ---- drawing ------------------------------------------------------------------------
; draw_cell: draw the background at row B, column C: the surface, water (with the
;      pearl, if it lies there) or the sea bed (keeps BC DE HL)
draw_cell:
        push hl
        push de
        push bc
        ld a, b
        ld de, glyph_wave
        cp surface_row
        ld a, col_surface
        jr z, _draw
        ld de, glyph_blank
        ld a, b
        cp bottom_row + 1
        ld a, col_bed
        jr nc, _draw
        ld a, b
        cp surface_row
        ld a, col_empty_row
        jr c, _draw                 ; the gauge row: only draw_air paints it
        ld hl, (pearl_x)
        ld a, l
        cp c
        jr nz, _water
        ld a, h
        cp b
        jr nz, _water
        ld de, glyph_pearl
        ld a, col_pearl
        jr _draw
_water: ld a, col_water
_draw:  call draw_glyph
        pop bc
        pop de
        pop hl
        ret
col_empty_row   equ 0x00

; draw_air: the gauge on row 1, columns 4-31: one lit cell per 4 units (rounded up)
draw_air:
        ld a, (air)
        add a, 3
        rrca
        rrca
        and 0x3F
        ld (air_cells), a
        ld a, (air)
        cp air_low
        ld d, col_air
        jr nc, _high
        ld d, col_air_low
_high:  ld hl, attr_base + 32 + 4
        ld a, (air_cells)
        ld b, 0
_cell:  ld e, d
        ld a, (air_cells)
        cp b
        jr z, _empty
        jr nc, _lit
_empty: ld e, 0
_lit:   ld (hl), e
        inc l
        inc b
        ld a, b
        cp 28
        jr nz, _cell
        ret

; draw_glyph: the 8 bytes at DE at row B, column C in attribute A (keeps BC)
draw_glyph:
        push bc
        push af
        ld a, b
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
        pop af
        pop bc
        push af
        call attr_addr
        pop af
        ld (hl), a
        ret

; ---- HUD --------------------------------------------------------------------------
draw_score:
        ld a, col_text
        ld hl, score
        ld bc, 0 * 256 + 6
        ld e, 4
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 31
        ld e, 1
        jp print_n

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0xD1FE          ; what rnd puts in place of a zero state
        include "../common/rnd.asm"

; ---- read_input: A = bit 0 right, 1 left, 2 down, 3 up, 4 fire ----------------
;      keyboard: Q up, A down, O left, P right, SPACE fire; plus a Kempston joystick
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
_no_o:  ld a, 0xFD                  ; half-row A S D F G
        in a, (0xFE)
        rra
        jr c, _no_a
        set 2, c
_no_a:  ld a, 0xFB                  ; half-row Q W E R T
        in a, (0xFE)
        rra
        jr c, _no_q
        set 3, c
_no_q:  ld a, 0x7F                  ; half-row SPACE SYMSHIFT M N B
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

; ---- screen helpers -------------------------------------------------------------
        include "../common/clear_screen.asm"
        include "../common/attr_addr.asm"
        include "../common/print_list.asm"
        include "../common/print_at.asm"
        include "../common/print_n.asm"

; print_char: character A at row B, column C in colour (text_attr); keeps BC DE HL
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
        ld a, (text_attr)
        call draw_glyph
        pop bc
        pop de
        pop hl
        ret

; ---- interrupt handler ----------------------------------------------------------
        include "../common/isr.asm"

; ---- data -----------------------------------------------------------------------
; glyphs: 8 bytes, top line first
glyph_blank:    defb 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00
glyph_wave:     defb 0x00, 0x00, 0x30, 0x49, 0x86, 0x00, 0x00, 0x00
glyph_diver:    defb 0x06, 0x0F, 0x06, 0x7E, 0xFC, 0x1C, 0x36, 0x63     ; a diver
glyph_pearl:    defb 0x00, 0x00, 0x18, 0x3C, 0x3C, 0x18, 0x7E, 0xFF     ; a pearl on its shell
glyph_jelly:    defb 0x3C, 0x7E, 0xFF, 0xFF, 0x54, 0x52, 0x94, 0x8A     ; a jellyfish

title_texts:
        defb 2, 8, col_title
        defb "D E E P   D I V E", 0
        defb 6, 10, col_text
        defb "YOU", 0
        defb 6, 17, col_text
        defb "PEARL", 0
        defb 6, 24, col_text
        defb "JELLY", 0
        defb 9, 3, col_text
        defb "DIVE FOR PEARLS, ONE BY ONE", 0
        defb 10, 3, col_text
        defb "AIR FILLS UP ONLY ON TOP", 0
        defb 11, 3, col_text
        defb "KEEP AWAY FROM THE JELLIES", 0
        defb 12, 7, col_text
        defb "20 PEARLS TO WIN", 0
        defb 14, 10, col_keys
        defb "Q - UP", 0
        defb 15, 10, col_keys
        defb "A - DOWN", 0
        defb 16, 10, col_keys
        defb "O - LEFT", 0
        defb 17, 10, col_keys
        defb "P - RIGHT", 0
        defb 18, 5, col_keys
        defb "OR A KEMPSTON JOYSTICK", 0
        defb 21, 6, col_flash
        defb "PRESS SPACE TO START", 0
        defb 0xFF

hud_texts:
        defb 0, 0, col_text
        defb "SCORE", 0
        defb 0, 25, col_text
        defb "LIVES", 0
        defb 1, 0, col_text
        defb "AIR", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
txt_won1:       defb "WELL DONE!", 0
txt_won2:       defb "A FINE STRING OF PEARLS", 0
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
