; ============================================================================
;  SKY HARVEST - an original ZX Spectrum 48K game written for OakEmu-RL.
;
;  Fly a hot-air balloon around the sky and pick the fruit and stars that
;  appear at random places. A pick scores 1 point plus a quick-pick bonus
;  (up to 5 more, falling away while the fruit waits). Birds fly across the
;  sky at random heights and speeds; touching one costs one of three lives.
;  Every 8 picks the sky gets busier (more and faster birds). The day lasts
;  99 seconds (TIME on the HUD); the game ends when it is over or when the
;  last life is lost.
;
;  Controls: a Kempston joystick ONLY (port 0x1F, active-high bits):
;        up/down/left/right move the balloon one cell every two frames,
;        two directions together move it diagonally; FIRE starts a game on
;        the title screen. The keyboard is never read.
;
;  Assemble with pasmo:  pasmo --alocal --bin sky_harvest.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in sky_harvest.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness comes from the 16-bit xorshift state `rng_seed`,
;  used as the live generator state and never reseeded from anything else:
;  the same seed and the same joystick moves always give the same game.
;
;  Graphics: the balloon, the fruit and the birds are 8x8 glyphs (with pixel
;  detail) in single character cells over a bright cyan sky (the colours
;  are chosen to stay apart in grayscale: black birds, a red balloon,
;  magenta cherries and white stars on a light sky). Each frame the
;  objects' cells are erased to sky, the game is updated, and the objects
;  are drawn again (fruit, then birds, then the balloon on top). The score is
;  packed BCD (three bytes, six digits, most significant first) updated with
;  DAA, and so is the clock (one byte).
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800

field_top       equ 1               ; rows 1..22 are sky, row 0 is the HUD
field_bottom    equ 22
ground_row      equ 23              ; a strip of grass, never entered
max_x           equ 31
start_x         equ 15
start_y         equ 11
start_lives     equ 3
start_time      equ 0x99            ; BCD seconds
tick_frames     equ 50              ; frames per second of the clock
move_period     equ 2               ; frames per one-cell move of the balloon
bonus_start     equ 5               ; quick-pick bonus of a new fruit
bonus_period    equ 30              ; frames per point of bonus lost
num_birds       equ 6
bird_size       equ 8               ; bytes of one bird record
start_birds     equ 2               ; birds in the sky at level 0
slowest_bird    equ 10              ; frames per cell at level 0 (plus 0..3)
max_level       equ 8
picks_per_level equ 8               ; (a power of two: level = picks / 8)
hit_pause       equ 30              ; frames the crash is shown

col_sky         equ 0x68            ; bright cyan paper, black ink
col_balloon     equ 0x6A            ; bright red ink on the sky
col_fruit       equ 0x6B            ; bright magenta ink on the sky
col_star        equ 0x6F            ; bright white ink on the sky
col_bird        equ 0x68            ; black ink on the sky
col_hit         equ 0xD7            ; flashing white on bright red
col_grass       equ 0x60            ; black tufts on bright green
col_text        equ 0x47
col_title       equ 0x46
col_keys        equ 0x45
col_flash       equ 0xC7

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (sky_harvest.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0x5EED         ; 0x8000 live xorshift state (zero is replaced)
score:          defb 0, 0, 0        ; 0x8002 packed BCD, 6 digits, high byte first
lives:          defb start_lives    ; 0x8005 binary
player_x:       defb start_x        ; 0x8006 column of the balloon (0-31)
player_y:       defb start_y        ; 0x8007 row of the balloon (1-22)
fruit_x:        defb 0              ; 0x8008 column of the fruit (0-31)
fruit_y:        defb 0              ; 0x8009 row of the fruit (1-22)
fruit_kind:     defb 0              ; 0x800A 0 cherry, 1 star (the same points)
bonus:          defb 0              ; 0x800B quick-pick bonus still on offer (0-5)
bonus_timer:    defb 0              ; 0x800C
time_left:      defb start_time     ; 0x800D packed BCD seconds left
time_timer:     defb tick_frames    ; 0x800E
level:          defb 0              ; 0x800F 0..8, picks / 8
picks:          defb 0              ; 0x8010 fruit picked this game (binary, wraps)
active_birds:   defb start_birds    ; 0x8011 bird slots in use (2..6)
bird_base:      defb slowest_bird   ; 0x8012 slowest bird period of this level
move_timer:     defb move_period    ; 0x8013
input:          defb 0              ; 0x8014 last joystick bits
hit_flag:       defb 0              ; 0x8015 a bird touched the balloon this frame
got_flag:       defb 0              ; 0x8016 the balloon reached the fruit this frame
frames:         defw 0              ; 0x8017 frames counted by the interrupt
text_attr:      defb col_text       ; 0x8019
                defs 6
; bird records (bird_size bytes): row (0 = not flying), column, direction
; (+1 right, -1 left), period (frames per cell), timer, wait (frames before
; the next flight), wing frame, spare
birds:
bird0_y:        defb 0              ; 0x8020
bird0_x:        defb 0
bird0_dir:      defb 0
                defs 5
bird1_y:        defb 0              ; 0x8028
bird1_x:        defb 0
bird1_dir:      defb 0
                defs 5
bird2_y:        defb 0              ; 0x8030
bird2_x:        defb 0
bird2_dir:      defb 0
                defs 5
bird3_y:        defb 0              ; 0x8038
bird3_x:        defb 0
bird3_dir:      defb 0
                defs 5
bird4_y:        defb 0              ; 0x8040
bird4_x:        defb 0
bird4_dir:      defb 0
                defs 5
bird5_y:        defb 0              ; 0x8048
bird5_x:        defb 0
bird5_dir:      defb 0
                defs 5

b_y             equ 0               ; offsets in a bird record
b_x             equ 1
b_dir           equ 2
b_period        equ 3
b_timer         equ 4
b_wait          equ 5
b_wing          equ 6

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
        ld a, 1
        out (0xFE), a               ; blue border
        ei

; ---- title screen: wait for Kempston fire ---------------------------------
title:
        ld sp, stack_top
        xor a
        call clear_screen
        ld ix, title_texts
        call print_list
        ld bc, 10 * 256 + 9         ; the legend: balloon, fruit, star, bird
        ld de, glyph_balloon
        ld a, 0x42
        call draw_glyph
        ld bc, 12 * 256 + 9
        ld de, glyph_cherry
        ld a, 0x43
        call draw_glyph
        ld bc, 12 * 256 + 11
        ld de, glyph_star
        ld a, 0x47
        call draw_glyph
        ld bc, 14 * 256 + 9
        ld de, glyph_bird0
        ld a, 0x68
        call draw_glyph
title_wait:
        halt
        call read_input
        and 0x10
        jr z, title_wait

; ---- a new game -------------------------------------------------------------
new_game:
        xor a
        ld (score), a
        ld (score + 1), a
        ld (score + 2), a
        ld (level), a
        ld (picks), a
        ld a, start_lives
        ld (lives), a
        ld a, start_x
        ld (player_x), a
        ld a, start_y
        ld (player_y), a
        ld a, start_time
        ld (time_left), a
        ld a, tick_frames
        ld (time_timer), a
        ld a, move_period
        ld (move_timer), a
        ld a, start_birds
        ld (active_birds), a
        ld a, slowest_bird
        ld (bird_base), a
        call reset_birds
        xor a
        call clear_screen
        call draw_sky
        ld ix, hud_texts
        call print_list
        call draw_score
        call draw_time
        call draw_lives
        call new_fruit
        call draw_objects

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        call erase_objects
        call read_input
        ld (input), a
        xor a
        ld (hit_flag), a
        ld (got_flag), a
        ld hl, move_timer
        dec (hl)
        call z, move_balloon
        call update_birds
        ld a, (got_flag)
        or a
        call nz, fruit_collected
        ld a, (hit_flag)
        or a
        call nz, life_lost
        call update_bonus
        call update_clock
        call draw_objects
        jp main_loop

; ---- events -----------------------------------------------------------------
fruit_collected:                    ; reached when the balloon picks the fruit
        ld a, (bonus)
        inc a                       ; 1..6 points (a BCD digit)
        call add_score
        call draw_score
        ld hl, picks
        inc (hl)
        ld a, (hl)                  ; level = picks / 8, at most max_level
        rrca
        rrca
        rrca
        and 0x1F
        cp max_level + 1
        jr c, _level
        ld a, max_level
_level: ld (level), a
        ld b, a
        srl a                       ; birds = 2 + level / 2, at most num_birds
        add a, start_birds
        cp num_birds + 1
        jr c, _birds
        ld a, num_birds
_birds: ld (active_birds), a
        ld a, slowest_bird          ; and each level a little faster
        sub b
        ld (bird_base), a
        jp new_fruit

life_lost:                          ; reached when a bird touches the balloon
        ld hl, lives
        dec (hl)
        call draw_lives
        call draw_objects
        ld a, (player_y)            ; show the crash
        ld b, a
        ld a, (player_x)
        ld c, a
        call attr_addr
        ld (hl), col_hit
        ld b, hit_pause
_pause: halt
        djnz _pause
        ld a, (lives)
        or a
        jp z, game_over
        call erase_objects          ; the sky clears of birds
        jp reset_birds

time_up:                            ; reached when the clock runs out
        ld sp, stack_top
        ld a, col_flash
        ld hl, txt_time_up
        ld bc, 11 * 256 + 9
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
end_release:                        ; wait until fire is up again
        halt
        call read_input
        and 0x10
        jr nz, end_release
        jp title

; ---- the balloon ----------------------------------------------------------------
; move_balloon: HL = move_timer; one cell in each direction held
move_balloon:
        ld (hl), move_period
        ld a, (input)
        ld c, a
        bit 0, c                    ; right
        jr z, _left
        ld a, (player_x)
        cp max_x
        jr nc, _vert
        inc a
        ld (player_x), a
        jr _vert
_left:  bit 1, c
        jr z, _vert
        ld a, (player_x)
        or a
        jr z, _vert
        dec a
        ld (player_x), a
_vert:  bit 2, c                    ; down
        jr z, _up
        ld a, (player_y)
        cp field_bottom
        jr nc, check_balloon
        inc a
        ld (player_y), a
        jr check_balloon
_up:    bit 3, c
        jr z, check_balloon
        ld a, (player_y)
        cp field_top + 1
        jr c, check_balloon
        dec a
        ld (player_y), a
        ; fall through

; check_balloon: flag the fruit or a bird in the balloon's cell
check_balloon:
        ld a, (player_x)
        ld c, a
        ld a, (player_y)
        ld b, a
        ld a, (fruit_y)
        cp b
        jr nz, _birds
        ld a, (fruit_x)
        cp c
        jr nz, _birds
        ld a, 1
        ld (got_flag), a
_birds: ld ix, birds
        ld e, num_birds
_bird:  ld a, (ix + b_y)            ; 0 (not flying) never matches a row >= 1
        cp b
        jr nz, _next
        ld a, (ix + b_x)
        cp c
        jr nz, _next
        ld a, 1
        ld (hit_flag), a
_next:  push bc
        ld bc, bird_size
        add ix, bc
        pop bc
        dec e
        jr nz, _bird
        ret

; ---- the fruit ----------------------------------------------------------------------
; new_fruit: a fruit at a random cell of the sky, never under the balloon
new_fruit:
        call rnd
        and 31
        ld (fruit_x), a
_row:   call rnd
        and 31
        cp field_bottom
        jr nc, _row
        inc a
        ld (fruit_y), a
        ld hl, player_y
        cp (hl)
        jr nz, _kind
        ld a, (fruit_x)
        ld hl, player_x
        cp (hl)
        jr z, new_fruit
_kind:  call rnd
        and 1
        ld (fruit_kind), a
        ld a, bonus_start
        ld (bonus), a
        ld a, bonus_period
        ld (bonus_timer), a
        ret

update_bonus:
        ld a, (bonus)
        or a
        ret z
        ld hl, bonus_timer
        dec (hl)
        ret nz
        ld (hl), bonus_period
        ld hl, bonus
        dec (hl)
        ret

; ---- the birds -------------------------------------------------------------------------
update_birds:
        ld ix, birds
        ld b, num_birds
        ld c, 0                     ; slot number
_bird:  push bc
        ld a, (ix + b_y)
        or a
        jr nz, _fly
        ld a, (active_birds)        ; a resting bird: only slots in use take off
        dec a
        cp c
        jr c, _next
        dec (ix + b_wait)
        jr nz, _next
        call spawn_bird
        jr _next
_fly:   dec (ix + b_timer)
        jr nz, _next
        ld a, (ix + b_period)
        ld (ix + b_timer), a
        ld a, (ix + b_wing)
        xor 1
        ld (ix + b_wing), a
        ld a, (ix + b_x)
        add a, (ix + b_dir)
        cp max_x + 1
        jr nc, _gone                ; off either edge (32 or 0xFF)
        ld (ix + b_x), a
        ld hl, player_x             ; into the balloon?
        cp (hl)
        jr nz, _next
        ld a, (player_y)
        cp (ix + b_y)
        jr nz, _next
        ld a, 1
        ld (hit_flag), a
        jr _next
_gone:  ld (ix + b_y), 0
        call bird_rest
_next:  ld de, bird_size
        add ix, de
        pop bc
        inc c
        djnz _bird
        ret

; spawn_bird: IX = record; a random row (the balloon's too: staying put is not safe),
; side and speed
spawn_bird:
_row:   call rnd
        and 31
        cp field_bottom
        jr nc, _row
        inc a
        ld (ix + b_y), a
        call rnd
        rla                         ; carry: from the right edge, flying left
        ld a, 1
        ld d, 0
        jr nc, _dir
        ld a, 0xFF
        ld d, max_x
_dir:   ld (ix + b_dir), a
        ld (ix + b_x), d
        call rnd
        and 3
        ld hl, bird_base
        add a, (hl)
        ld (ix + b_period), a
        ld (ix + b_timer), a
        ret

; reset_birds: every bird rests for a random while
reset_birds:
        ld ix, birds
        ld b, num_birds
_bird:  ld (ix + b_y), 0
        call bird_rest
        ld de, bird_size
        add ix, de
        djnz _bird
        ret

; bird_rest: IX = record; wait 10..73 frames before the next flight (keeps BC)
bird_rest:
        call rnd
        and 63
        add a, 10
        ld (ix + b_wait), a
        ret

; ---- the clock ---------------------------------------------------------------------------
update_clock:
        ld hl, time_timer
        dec (hl)
        ret nz
        ld (hl), tick_frames
        ld a, (time_left)
        sub 1
        daa
        ld (time_left), a
        call draw_time
        ld a, (time_left)
        or a
        ret nz
        call draw_objects
        jp time_up

; ---- add_score: add A (BCD, 0..0x99) to the 6-digit BCD score ------------------------------
add_score:
        ld hl, score + 2
        add a, (hl)
        daa
        ld (hl), a
        dec hl
        ld a, (hl)
        adc a, 0
        daa
        ld (hl), a
        dec hl
        ld a, (hl)
        adc a, 0
        daa
        ld (hl), a
        ret

; ---- drawing the objects ------------------------------------------------------------------
erase_objects:
        ld a, (fruit_y)
        ld b, a
        ld a, (fruit_x)
        ld c, a
        call erase_cell
        ld ix, birds
        ld e, num_birds
_bird:  ld a, (ix + b_y)
        or a
        jr z, _next
        ld b, a
        ld c, (ix + b_x)
        call erase_cell
_next:  ld bc, bird_size
        add ix, bc
        dec e
        jr nz, _bird
        ld a, (player_y)
        ld b, a
        ld a, (player_x)
        ld c, a
        jp erase_cell

draw_objects:
        ld a, (fruit_y)
        ld b, a
        ld a, (fruit_x)
        ld c, a
        ld de, glyph_cherry
        ld a, (fruit_kind)
        or a
        ld a, col_fruit
        jr z, _fruit
        ld de, glyph_star
        ld a, col_star
_fruit: call draw_glyph
        ld ix, birds
        ld e, num_birds
_bird:  ld a, (ix + b_y)
        or a
        jr z, _next
        ld b, a
        ld c, (ix + b_x)
        push de
        ld de, glyph_bird0
        ld a, (ix + b_wing)
        or a
        jr z, _wing
        ld de, glyph_bird1
_wing:  ld a, col_bird
        call draw_glyph
        pop de
_next:  ld bc, bird_size
        add ix, bc
        dec e
        jr nz, _bird
        ld a, (player_y)
        ld b, a
        ld a, (player_x)
        ld c, a
        ld de, glyph_balloon
        ld a, col_balloon
        jp draw_glyph

; draw_glyph: the 8 bytes at DE in the cell at row B, column C, attribute A (keeps BC)
draw_glyph:
        push af
        call cell_addr
        push bc
        ld b, 8
_line:  ld a, (de)
        ld (hl), a
        inc de
        inc h
        djnz _line
        pop bc
        call attr_addr
        pop af
        ld (hl), a
        ret

; erase_cell: the cell at row B, column C becomes empty sky (keeps BC, DE)
erase_cell:
        call cell_addr
        xor a
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        inc h
        ld (hl), a
        call attr_addr
        ld (hl), col_sky
        ret

; ---- HUD --------------------------------------------------------------------------------
draw_score:
        ld a, col_text
        ld hl, score
        ld bc, 0 * 256 + 6
        ld e, 3
        jp print_bcd

draw_time:
        ld a, col_text
        ld hl, time_left
        ld bc, 0 * 256 + 19
        ld e, 1
        jp print_bcd

draw_lives:
        ld a, col_text
        ld (text_attr), a
        ld a, (lives)
        add a, "0"
        ld bc, 0 * 256 + 30
        jp print_char

; print_bcd: E packed BCD bytes from HL as 2E digits at row B, column C, colour A
print_bcd:
        ld (text_attr), a
_byte:  ld a, (hl)
        rrca
        rrca
        rrca
        rrca
        and 0x0F
        add a, "0"
        call print_char
        inc c
        ld a, (hl)
        and 0x0F
        add a, "0"
        call print_char
        inc c
        inc hl
        dec e
        jr nz, _byte
        ret

; ---- helpers shared with the other bundled games (../common/) ----------------
rnd_zero_seed   equ 0x5EED          ; what rnd puts in place of a zero state
        include "../common/rnd.asm"

; ---- read_input: the Kempston joystick only --------------------------------------------
;      A = bit 0 right, 1 left, 2 down, 3 up, 4 fire (0 without an interface)
read_input:
        xor a
        in a, (0x1F)                ; port 0x001F: active-high bits
        ld b, a
        and 0xE0                    ; no interface (floating bus): ignore it
        ld a, b
        ret z
        xor a
        ret

; ---- screen helpers --------------------------------------------------------------------
        include "../common/clear_screen.asm"

; draw_sky: the sky rows in blue, the grass row at the bottom
draw_sky:
        ld hl, attr_base + field_top * 32
        ld de, attr_base + field_top * 32 + 1
        ld bc, 32 * (field_bottom - field_top + 1) - 1
        ld (hl), col_sky
        ldir
        ld c, 0
_grass: ld b, ground_row
        ld de, glyph_grass
        ld a, col_grass
        call draw_glyph
        inc c
        ld a, c
        cp 32
        jr c, _grass
        ret

; cell_addr: B = row, C = column -> HL = bitmap address of the cell's top line
cell_addr:
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
        ret

; attr_addr and the text helpers, shared with the other bundled games (../common/)
        include "../common/attr_addr.asm"
        include "../common/print_list.asm"
        include "../common/print_at.asm"

; print_char: character A at row B, column C in colour (text_attr); keeps BC DE HL
print_char:
        push hl
        push de
        push bc
        ld l, a
        ld h, 0
        add hl, hl
        add hl, hl
        add hl, hl
        ld de, 0x3C00               ; ROM character set (0x3D00 is the space)
        add hl, de
        ex de, hl
        call cell_addr
        ld b, 8
_line:  ld a, (de)
        ld (hl), a
        inc de
        inc h
        djnz _line
        pop bc
        push bc
        call attr_addr
        ld a, (text_attr)
        ld (hl), a
        pop bc
        pop de
        pop hl
        ret

; ---- interrupt handler --------------------------------------------------------------------
        include "../common/isr.asm"

; ---- data ----------------------------------------------------------------------------------
glyph_balloon:                      ; envelope, ropes and basket
        defb 0x3C, 0x7E, 0xDF, 0xDF, 0x7E, 0x24, 0x18, 0x18
glyph_cherry:                       ; two cherries on a stalk
        defb 0x06, 0x08, 0x14, 0x22, 0x77, 0xEF, 0xEE, 0x44
glyph_star:
        defb 0x10, 0x10, 0x38, 0xFE, 0x7C, 0x38, 0x6C, 0x44
glyph_bird0:                        ; wings up
        defb 0x00, 0xC3, 0x66, 0x3C, 0x7E, 0x18, 0x00, 0x00
glyph_bird1:                        ; wings down
        defb 0x00, 0x00, 0x3C, 0x7E, 0xE7, 0xC3, 0x00, 0x00
glyph_grass:
        defb 0x00, 0x00, 0x00, 0x11, 0x55, 0x55, 0x00, 0x00

title_texts:
        defb 2, 10, col_title
        defb "SKY HARVEST", 0
        defb 5, 2, col_text
        defb "FLY YOUR BALLOON ROUND THE SKY", 0
        defb 6, 3, col_text
        defb "PICK FRUIT, DODGE THE BIRDS.", 0
        defb 7, 4, col_text
        defb "QUICK PICKS SCORE MORE!", 0
        defb 10, 11, col_text
        defb " YOU", 0
        defb 12, 13, col_text
        defb "1-6 POINTS", 0
        defb 14, 11, col_text
        defb " COSTS A LIFE", 0
        defb 17, 5, col_keys
        defb "KEMPSTON JOYSTICK ONLY", 0
        defb 19, 6, col_flash
        defb "PRESS FIRE TO START", 0
        defb 21, 4, col_text
        defb "3 LIVES, 99 SECONDS OF DAY", 0
        defb 0xFF

hud_texts:
        defb 0, 0, col_text
        defb "SCORE", 0
        defb 0, 14, col_text
        defb "TIME", 0
        defb 0, 24, col_text
        defb "LIVES", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
txt_time_up:    defb " TIME IS UP! ", 0
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
