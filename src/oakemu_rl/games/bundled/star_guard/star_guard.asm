; ============================================================================
;  STAR GUARD - an original ZX Spectrum 48K game written for OakEmu-RL,
;  in the spirit of the classic fixed shooters.
;
;  A formation of invaders (four rows of six) marches side to side, a step
;  down at each edge, and drops bombs. Your cannon at the bottom moves left
;  and right and fires one shot at a time. Shoot every invader to bring the
;  next wave (which starts lower); a bomb on the cannon costs one of three
;  lives, and invaders that reach the cannon's row end the game at once.
;
;  Keys: O left, P right, M or SPACE fire (Kempston joystick too).
;        SPACE (or fire) starts a game on the title screen.
;
;  Scoring: 30 points for an invader of the top row, 20 for the second row,
;           10 for the two lower rows.
;
;  Assemble with pasmo:  pasmo --alocal --bin star_guard.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in star_guard.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness comes from the 16-bit xorshift state `rng_seed`,
;  used as the live generator state and never reseeded from anything else:
;  the same seed and the same key presses always give the same game.
;
;  Graphics are pixel sprites on a black background: the invaders are 8x8
;  bitmaps drawn at any pixel position (they march 2 pixels at a time), the
;  cannon is a 16x8 bitmap, shots are 1 pixel wide and bombs a 2-pixel
;  zigzag. Collisions are worked out from the positions, not from the screen.
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800

cols            equ 6               ; invaders in a row
rows            equ 4               ; rows of invaders
n_invaders      equ cols * rows
col_step        equ 24              ; pixels from one column to the next
row_step        equ 16              ; pixels from one row to the next
move_step       equ 2               ; pixels per march step
drop_step       equ 8               ; pixels per step down at an edge
form_left       equ 4               ; no invader's left edge goes left of this
form_right      equ 244             ; ... nor right of this (it ends at 251)
form_start_x    equ 64              ; the formation (128 pixels wide) centred
form_start_y    equ 24              ; top row of wave 1
invade_y        equ 168             ; an invader whose top reaches this has landed
cannon_y        equ 176             ; the cannon's 8 lines: 176-183 (cell row 22)
cannon_max      equ 240             ; the cannon is 16 pixels wide
cannon_start    equ 120
cannon_speed    equ 2               ; pixels per frame
shot_start      equ 172             ; a new shot's top line (before its first move)
shot_speed      equ 6               ; pixels per frame, upwards
shot_top        equ 8               ; a shot above this line is gone
bomb_speed      equ 2               ; pixels per frame, downwards
bomb_floor      equ 184             ; a bomb whose top reaches this is gone
ground_line     equ 188
start_lives     equ '3'
boom_frames     equ 8               ; frames an invader's explosion is shown
hit_pause       equ 40              ; frames the cannon's explosion is shown
wave_pause      equ 25              ; frames between two waves

col_text        equ 0x47            ; bright white ink on black
col_title       equ 0x46
col_keys        equ 0x45
col_flash       equ 0xC7
col_top         equ 0x43            ; bright magenta ink (cell rows 1-5)
col_mid         equ 0x47            ; bright white ink (rows 6-19)
col_low         equ 0x44            ; bright green ink (rows 20-23)

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (star_guard.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0x5EED         ; 0x8000 live xorshift state (zero is replaced)
score:          defb "00000"        ; 0x8002 ASCII digits
lives:          defb "3"            ; 0x8007 ASCII digit
wave:           defb 1              ; 0x8008 the wave being played (1, 2, ...)
cannon_x:       defb cannon_start   ; 0x8009 pixel x of the cannon's left edge (0-240)
invaders_left:  defb n_invaders     ; 0x800A invaders alive in this wave
formation_x:    defb form_start_x   ; 0x800B pixel x of column 0 (mod 256)
formation_y:    defb form_start_y   ; 0x800C pixel y of row 0
formation_dir:  defb 1              ; 0x800D +1 right, -1 left
column_mask:    defb 0x3F           ; 0x800E bit c: column c has an invader left
shot_y:         defb 0              ; 0x800F top line of the shot (0 = no shot)
shot_x:         defb 0              ; 0x8010
bomb1_y:        defb 0              ; 0x8011 top line of bomb 1 (0 = none)
bomb1_x:        defb 0              ; 0x8012
bomb2_y:        defb 0              ; 0x8013
bomb2_x:        defb 0              ; 0x8014
invaders_hit:   defb 0              ; 0x8015 invaders shot this game (binary, wraps)
cannon_hits:    defb 0              ; 0x8016 bombs that hit the cannon this game
row0_mask:      defb 0x3F           ; 0x8017 bit c: the invader of row 0, column c lives
row1_mask:      defb 0x3F           ; 0x8018 row 1
row2_mask:      defb 0x3F           ; 0x8019 row 2
row3_mask:      defb 0x3F           ; 0x801A row 3 (the lowest)
move_timer:     defb 1              ; frames until the next march step
anim:           defb 0              ; 0 or 8: which of the two invader frames
bomb_chance:    defb 0              ; chance (of 256) per frame of a new bomb
boom_timer:     defb 0              ; frames left of the explosion (0 = none)
boom_x:         defb 0
boom_y:         defb 0
min_x:          defb 0              ; extent of the living invaders as last drawn
max_x:          defb 0
max_y:          defb 0
plot_mode:      defb 0              ; 0 erase, else draw
cur_x:          defb 0              ; formation_pass's position
cur_y:          defb 0
cur_col:        defb 0
cur_row:        defb 0
input:          defb 0              ; last input bits
text_attr:      defb col_text
frames:         defw 0              ; frames counted by the interrupt
alive:          defs n_invaders     ; 1 = alive; row by row from the top

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
        ld a, col_text
        call clear_screen
        ld ix, title_texts
        call print_list
        ld bc, 72 * 256 + 84        ; the score table's invaders
        ld de, invader_gfx
        call draw8
        ld bc, 80 * 256 + 84
        ld de, invader_gfx + 16
        call draw8
        ld bc, 88 * 256 + 84
        ld de, invader_gfx + 32
        call draw8
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
        ld a, "0"
        ld (score + 4), a
        ld a, start_lives
        ld (lives), a
        ld a, 1
        ld (wave), a
        ld a, cannon_start
        ld (cannon_x), a
        xor a
        ld (invaders_hit), a
        ld (cannon_hits), a
        ld a, col_text
        call clear_screen
        call colour_bands
        ld ix, hud_texts
        call print_list
        call draw_score
        call draw_lives
        call draw_wave
        ld hl, 0x4000 + 0x1000 + 4 * 256 + 7 * 32   ; pixel line 188: the ground
        ld b, 32
_ground:
        ld (hl), 0xFF
        inc l
        djnz _ground
        call start_wave

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        call read_input
        ld (input), a
        xor a                       ; erase the shot and the bombs
        ld (plot_mode), a
        call projectiles
        call boom_tick
        call move_cannon
        call update_formation
        ld a, (input)               ; fire: a new shot when none is flying
        and 0x10
        jr z, ml_shot
        ld a, (shot_y)
        or a
        jr nz, ml_shot
        ld a, shot_start
        ld (shot_y), a
        ld a, (cannon_x)
        add a, 7
        ld (shot_x), a
ml_shot:
        call update_shot
        call update_bombs
        ld a, 1                     ; draw the shot and the bombs
        ld (plot_mode), a
        call projectiles
        jp main_loop

; ---- events -----------------------------------------------------------------
invader_hit:                        ; reached when the shot hits an invader
        ld (ix + 0), 0              ; IX = its entry, H = x, D = y, E = row
        xor a
        ld (shot_y), a
        ld a, (invaders_hit)
        inc a
        ld (invaders_hit), a
        push de
        push hl
        call boom_clear
        pop hl
        pop de
        ld a, h
        ld (boom_x), a
        ld c, a
        ld a, d
        ld (boom_y), a
        ld b, a
        push de
        push bc
        call clear_cell2
        pop bc
        ld de, boom_gfx
        call draw8
        pop de
        ld a, boom_frames
        ld (boom_timer), a
        ld hl, row_points           ; tens of points for the row
        ld d, 0
        add hl, de
        ld b, (hl)
_add:   push bc
        ld hl, score + 3
        ld b, 4
        call inc_digits
        pop bc
        djnz _add
        call draw_score
        call calc_columns
        ld hl, invaders_left
        dec (hl)
        ret nz
        ; fall through: the last invader of the wave is gone

wave_cleared:                       ; reached when a wave has been shot down
        ld hl, wave
        inc (hl)
        call draw_wave
        ld b, wave_pause
_pause: halt
        djnz _pause
        jp start_wave

cannon_hit:                         ; reached when a bomb hits the cannon
        ld hl, cannon_hits
        inc (hl)
        ld hl, lives
        dec (hl)
        call draw_lives
        xor a                       ; the shot and the bombs vanish
        ld (shot_y), a              ; (they were erased at the start of the frame)
        ld (bomb1_y), a
        ld (bomb2_y), a
        call clear_cannon_row
        ld a, (cannon_x)
        ld c, a
        ld b, cannon_y
        ld de, wreck_gfx
        call draw16
        ld b, hit_pause
_pause: halt
        djnz _pause
        call clear_cannon_row
        ld a, (lives)
        cp "0"
        ret nz
        ; fall through: the last life is lost

game_over:                          ; reached when the last life is lost or
        ld sp, stack_top            ; the invaders land
        ld a, col_flash
        ld hl, txt_game_over
        ld bc, 11 * 256 + 11
        call print_at
        ld b, 100
_wait:  halt
        djnz _wait
_release:                           ; wait until SPACE/fire is up again
        halt
        call read_input
        and 0x10
        jr nz, _release
        jp title

; ---- a new wave: the formation back at the top (lower in later waves) --------
start_wave:
        ld hl, alive
        ld b, n_invaders
_fill:  ld (hl), 1
        inc hl
        djnz _fill
        ld a, n_invaders
        ld (invaders_left), a
        call calc_columns
        ld a, form_start_x
        ld (formation_x), a
        ld a, (wave)                ; y = 24 + 8 * min(wave - 1, 4)
        dec a
        cp 5
        jr c, _low
        ld a, 4
_low:   add a, a
        add a, a
        add a, a
        add a, form_start_y
        ld (formation_y), a
        ld a, (wave)                ; bombs: 6 + 3 * wave (of 256) per frame
        ld b, a
        add a, a
        add a, b
        add a, 6
        jr nc, _chance
        ld a, 255
_chance:
        ld (bomb_chance), a
        ld a, 1
        ld (formation_dir), a
        ld (move_timer), a
        xor a
        ld (anim), a
        ld (shot_y), a
        ld (bomb1_y), a
        ld (bomb2_y), a
        ld (boom_timer), a
        ld b, 8                     ; an empty sky: pixel lines 8-175
_clear: push bc
        ld c, 0
        call pixel_addr
        ld d, h
        ld e, l
        inc e
        ld (hl), 0
        ld bc, 31
        ldir
        pop bc
        inc b
        ld a, b
        cp cannon_y
        jr c, _clear
        ld a, 1
        ld (plot_mode), a
        jp formation_pass

; ---- the cannon ---------------------------------------------------------------
move_cannon:
        ld a, (input)
        and 3
        cp 1
        jr z, _right
        cp 2
        jr nz, _draw
        ld a, (cannon_x)            ; left
        cp cannon_speed
        jr c, _draw
        sub cannon_speed
        ld (cannon_x), a
        jr _draw
_right: ld a, (cannon_x)
        cp cannon_max
        jr nc, _draw
        add a, cannon_speed
        ld (cannon_x), a
_draw:  call clear_cannon_row
        ld a, (cannon_x)
        ld c, a
        ld b, cannon_y
        ld de, cannon_gfx
        jp draw16

; clear_cannon_row: empty the 8 pixel lines of cell row 22
clear_cannon_row:
        ld hl, 0x4000 + 0x1000 + 6 * 32
        ld b, 8
_line:  push bc
        push hl
        ld d, h
        ld e, l
        inc e
        ld (hl), 0
        ld bc, 31
        ldir
        pop hl
        inc h
        pop bc
        djnz _line
        ret

; ---- the formation --------------------------------------------------------------
update_formation:
        ld hl, move_timer
        dec (hl)
        ret nz
        ld a, (invaders_left)       ; the fewer, the faster
        ld e, a
        ld d, 0
        ld hl, march_periods
        add hl, de
        ld a, (hl)
        ld (move_timer), a
        xor a
        ld (plot_mode), a
        call formation_pass         ; erase
        ld a, (anim)
        xor 8
        ld (anim), a
        ld a, (formation_dir)
        or a
        jp m, _left
        ld a, (max_x)
        cp form_right
        jr nc, _drop
        ld a, (formation_x)
        add a, move_step
        jr _moved
_left:  ld a, (min_x)
        cp form_left + 1
        jr c, _drop
        ld a, (formation_x)
        sub move_step
_moved: ld (formation_x), a
        jr _draw
_drop:  ld a, (formation_dir)
        neg
        ld (formation_dir), a
        ld a, (formation_y)
        add a, drop_step
        ld (formation_y), a
_draw:  ld a, 1
        ld (plot_mode), a
        call formation_pass
        ld a, (max_y)
        cp invade_y
        jp nc, game_over            ; the invaders have landed
        ret

; formation_pass: erase (plot_mode 0) or draw every living invader; drawing
; also records min_x, max_x and max_y of the living invaders
formation_pass:
        ld a, (plot_mode)
        or a
        jr z, _begin
        ld a, 255
        ld (min_x), a
        xor a
        ld (max_x), a
        ld (max_y), a
_begin: xor a
        ld (cur_row), a
        ld ix, alive
        ld a, (formation_y)
        ld (cur_y), a
_row:   ld a, (formation_x)
        ld (cur_x), a
        ld a, cols
        ld (cur_col), a
_col:   ld a, (ix + 0)
        or a
        jr z, _next
        ld a, (cur_y)
        ld b, a
        ld a, (cur_x)
        ld c, a
        ld a, (plot_mode)
        or a
        jr nz, _draw
        call clear_cell2
        jr _next
_draw:  ld a, (min_x)
        cp c
        jr c, _min
        ld a, c
        ld (min_x), a
_min:   ld a, (max_x)
        cp c
        jr nc, _max
        ld a, c
        ld (max_x), a
_max:   ld a, (max_y)
        cp b
        jr nc, _maxy
        ld a, b
        ld (max_y), a
_maxy:  ld a, (cur_row)         ; the row's bitmap: 16 bytes a row, 8 a frame
        add a, a
        add a, a
        add a, a
        add a, a
        ld e, a
        ld a, (anim)
        add a, e
        ld e, a
        ld d, 0
        ld hl, invader_gfx
        add hl, de
        ex de, hl
        call draw8
_next:  inc ix
        ld a, (cur_x)
        add a, col_step
        ld (cur_x), a
        ld hl, cur_col
        dec (hl)
        jr nz, _col
        ld a, (cur_y)
        add a, row_step
        ld (cur_y), a
        ld hl, cur_row
        inc (hl)
        ld a, (hl)
        cp rows
        jr c, _row
        ret

; calc_columns: the row masks and column_mask from the alive table
calc_columns:
        ld hl, alive
        ld ix, row0_mask
        ld d, 0                     ; D = the rows ORed together
        ld c, rows
_row:   ld b, cols
        ld e, 0
_col:   ld a, (hl)
        rrca                        ; carry = alive
        rr e                        ; column 0 ends in bit 2 ...
        inc hl
        djnz _col
        srl e                       ; ... and then in bit 0
        srl e
        ld (ix + 0), e
        inc ix
        ld a, d
        or e
        ld d, a
        dec c
        jr nz, _row
        ld a, d
        ld (column_mask), a
        ret

; ---- the shot ---------------------------------------------------------------------
update_shot:
        ld a, (shot_y)
        or a
        ret z
        sub shot_speed
        cp shot_top
        jr nc, _fly
        xor a
        ld (shot_y), a
        ret
_fly:   ld (shot_y), a
        ; fall through

; shot_vs_invaders: the shot's lines shot_y..shot_y+3 against every invader
shot_vs_invaders:
        ld ix, alive
        ld a, (formation_y)
        ld d, a                     ; D = y of the row
        ld e, 0                     ; E = row
_row:   ld a, (shot_y)
        add a, 3
        sub d
        cp 11                       ; overlaps the row's lines y..y+7?
        jr nc, _skip
        ld a, (formation_x)
        ld h, a                     ; H = x of the column
        ld b, cols
_col:   ld a, (ix + 0)
        or a
        jr z, _next
        ld a, (shot_x)
        sub h
        cp 8
        jp c, invader_hit
_next:  inc ix
        ld a, h
        add a, col_step
        ld h, a
        djnz _col
        jr _down
_skip:  ld bc, cols
        add ix, bc
_down:  ld a, d
        add a, row_step
        ld d, a
        inc e
        ld a, e
        cp rows
        jr c, _row
        ret

; ---- the bombs ----------------------------------------------------------------------
update_bombs:
        call rnd
        ld b, a
        ld a, (bomb_chance)
        ld c, a
        ld a, b
        cp c
        call c, spawn_bomb
        ld ix, bomb1_y
        call move_bomb
        jp c, cannon_hit
        ld ix, bomb2_y
        call move_bomb
        jp c, cannon_hit
        ret

; spawn_bomb: a free bomb slot gets a bomb under the lowest invader of a
; random column (nothing when the column is empty)
spawn_bomb:
        ld ix, bomb1_y
        ld a, (ix + 0)
        or a
        jr z, _free
        ld ix, bomb2_y
        ld a, (ix + 0)
        or a
        ret nz
_free:  call rnd
        and 7
        cp cols
        ret nc
        ld c, a                     ; C = column
        ld e, a
        ld d, 0
        ld hl, alive + (rows - 1) * cols
        add hl, de
        ld de, -cols
        ld b, rows
_scan:  ld a, (hl)
        or a
        jr nz, _found
        add hl, de
        djnz _scan
        ret
_found: dec b                       ; B = row
        ld a, b
        rlca
        rlca
        rlca
        rlca
        ld b, a
        ld a, (formation_y)
        add a, b
        add a, 8
        ld (ix + 0), a
        ld a, c                     ; x = formation_x + 24 * column + 3
        add a, a
        add a, a
        add a, a
        ld b, a
        add a, a
        add a, b
        ld b, a
        ld a, (formation_x)
        add a, b
        add a, 3
        ld (ix + 1), a
        ret

; move_bomb: IX = a bomb (y, x); carry set when it hits the cannon
move_bomb:
        ld a, (ix + 0)
        or a
        ret z
        add a, bomb_speed
        cp bomb_floor
        jr c, _fall
        xor a
        ld (ix + 0), a
        ret
_fall:  ld (ix + 0), a
        add a, 3
        cp cannon_y + 3             ; its lowest line on the cannon's body?
        jr c, _miss
        ld a, (cannon_x)
        ld c, a
        ld a, (ix + 1)
        sub c
        cp 14
        ret
_miss:  or a
        ret

; ---- the shot and the bombs on screen (plot_mode: 0 erase, else draw) ------------------
projectiles:
        ld a, (shot_y)
        or a
        jr z, _bombs
        ld b, a
        ld a, (shot_x)
        ld c, a
        call put_pixel
        inc b
        call put_pixel
        inc b
        call put_pixel
        inc b
        call put_pixel
_bombs: ld a, (bomb1_y)
        or a
        jr z, _two
        ld b, a
        ld a, (bomb1_x)
        ld c, a
        call bomb_pixels
_two:   ld a, (bomb2_y)
        or a
        ret z
        ld b, a
        ld a, (bomb2_x)
        ld c, a
        ; fall through

; bomb_pixels: a 2-pixel zigzag, 4 lines, at B = y, C = x
bomb_pixels:
        call put_pixel
        inc b
        inc c
        call put_pixel
        inc b
        dec c
        call put_pixel
        inc b
        inc c
        jp put_pixel

; ---- the explosion of a shot invader ---------------------------------------------------
boom_tick:
        ld a, (boom_timer)
        or a
        ret z
        dec a
        ld (boom_timer), a
        ret nz
        jr boom_erase
boom_clear:                         ; remove an explosion still on screen
        ld a, (boom_timer)
        or a
        ret z
        xor a
        ld (boom_timer), a
boom_erase:
        ld a, (boom_y)
        ld b, a
        ld a, (boom_x)
        ld c, a
        jp clear_cell2

; ---- HUD ---------------------------------------------------------------------------------
draw_score:
        ld a, col_text
        ld hl, score
        ld bc, 0 * 256 + 6
        ld e, 5
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 30
        ld e, 1
        jp print_n

draw_wave:                          ; two digits
        ld a, col_text
        ld (text_attr), a
        ld a, (wave)
        ld b, "0"
_tens:  cp 10
        jr c, _ones
        sub 10
        inc b
        jr _tens
_ones:  push af
        ld a, b
        ld bc, 0 * 256 + 18
        call print_char
        pop af
        add a, "0"
        inc c
        jp print_char

; colour_bands: the playfield's ink colours (the paper is black everywhere)
colour_bands:
        ld hl, attr_base + 1 * 32
        ld de, attr_base + 1 * 32 + 1
        ld bc, 5 * 32 - 1
        ld (hl), col_top
        ldir
        ld hl, attr_base + 20 * 32
        ld de, attr_base + 20 * 32 + 1
        ld bc, 4 * 32 - 1
        ld (hl), col_low
        ldir
        ret

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0x5EED          ; what rnd puts in place of a zero state
        include "../common/rnd.asm"

; ---- read_input: A = bit 0 right, 1 left, 2 down, 3 up, 4 fire --------------------------
;      keyboard: P right, O left, M or SPACE fire; plus a Kempston joystick
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
        cpl
        and 0x05                    ; SPACE or M
        jr z, _no_fire
        set 4, c
_no_fire:
        ld a, 0
        in a, (0x1F)                ; Kempston: active high
        ld b, a
        and 0xE0                    ; no interface (floating bus): ignore it
        jr nz, _done
        ld a, b
        or c
        ld c, a
_done:  ld a, c
        ret

; ---- pixel graphics ------------------------------------------------------------------
; pixel_addr: B = y (0-191), C = x -> HL = screen byte; keeps BC, DE
pixel_addr:
        ld a, b
        and 7
        or 0x40
        ld h, a
        ld a, b
        rra
        rra
        rra
        and 0x18
        or h
        ld h, a
        ld a, b
        rla
        rla
        and 0xE0
        ld l, a
        ld a, c
        rra
        rra
        rra
        and 0x1F
        or l
        ld l, a
        ret

; next_line: HL one pixel line down the screen; uses A
next_line:
        inc h
        ld a, h
        and 7
        ret nz
        ld a, l
        add a, 32
        ld l, a
        ret c
        ld a, h
        sub 8
        ld h, a
        ret

; put_pixel: set (plot_mode not 0) or clear the pixel at B = y, C = x; keeps BC
put_pixel:
        call pixel_addr
        ld a, c
        and 7
        ld e, a
        inc e
        ld a, 1
_shift: rrca                        ; 0x80 >> (x & 7)
        dec e
        jr nz, _shift
        ld e, a
        ld a, (plot_mode)
        or a
        ld a, e
        jr z, _erase
        or (hl)
        ld (hl), a
        ret
_erase: cpl
        and (hl)
        ld (hl), a
        ret

; draw8: OR the 8x8 bitmap at DE onto the screen at B = y, C = x
draw8:
        call pixel_addr
        ld a, c
        and 7
        ld c, a                     ; C = shift
        ld b, 8
_line:  push bc
        ld a, (de)
        inc de
        ld b, c
        ld c, 0
        inc b
        jr _test
_shift: srl a
        rr c
_test:  djnz _shift
        or (hl)
        ld (hl), a
        inc l
        ld a, c
        or (hl)
        ld (hl), a
        dec l
        call next_line
        pop bc
        djnz _line
        ret

; draw16: OR the 16x8 bitmap at DE (2 bytes a line) at B = y, C = x
draw16:
        call pixel_addr
        ld a, c
        and 7
        ld c, a                     ; C = shift
        ld b, 8
_line:  push bc
        push de
        push hl
        ex de, hl
        ld d, (hl)
        inc hl
        ld e, (hl)
        ld b, c
        ld c, 0
        inc b
        jr _test
_shift: srl d
        rr e
        rr c
_test:  djnz _shift
        pop hl
        ld a, d
        or (hl)
        ld (hl), a
        inc l
        ld a, e
        or (hl)
        ld (hl), a
        inc l
        ld a, c
        or (hl)
        ld (hl), a
        dec l
        dec l
        call next_line
        pop de
        inc de
        inc de
        pop bc
        djnz _line
        ret

; clear_cell2: clear 2 bytes x 8 lines from the byte holding pixel B = y, C = x
clear_cell2:
        call pixel_addr
        ld b, 8
_line:  ld (hl), 0
        inc l
        ld (hl), 0
        dec l
        call next_line
        djnz _line
        ret

; ---- screen helpers --------------------------------------------------------------------
        include "../common/clear_screen.asm"
        include "../common/attr_addr.asm"
        include "../common/print_list.asm"
        include "../common/print_at.asm"
        include "../common/print_n.asm"
        include "../common/print_char.asm"

; ---- interrupt handler --------------------------------------------------------------------
        include "../common/isr.asm"

; ---- data ----------------------------------------------------------------------------------
row_points:     defb 3, 2, 1, 1     ; tens of points for rows 0 (top) to 3

march_periods:                      ; frames per march step, by invaders left (0-24)
        defb 2, 2, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5
        defb 5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9

invader_gfx:                        ; per row: two 8x8 frames
        defb 0x18, 0x3C, 0x7E, 0xDB, 0xFF, 0x24, 0x5A, 0xA5   ; row 0: squid
        defb 0x18, 0x3C, 0x7E, 0xDB, 0xFF, 0x5A, 0x81, 0x42
        defb 0x42, 0x24, 0x7E, 0xDB, 0xFF, 0xBD, 0xA5, 0x24   ; row 1: crab
        defb 0x42, 0x24, 0x7E, 0xDB, 0xFF, 0x7E, 0x24, 0x42
        defb 0x3C, 0x7E, 0xFF, 0x99, 0xFF, 0x66, 0xDB, 0x81   ; rows 2-3: octopus
        defb 0x3C, 0x7E, 0xFF, 0x99, 0xFF, 0x24, 0x5A, 0xA5
        defb 0x3C, 0x7E, 0xFF, 0x99, 0xFF, 0x66, 0xDB, 0x81
        defb 0x3C, 0x7E, 0xFF, 0x99, 0xFF, 0x24, 0x5A, 0xA5

boom_gfx:                           ; a shot invader
        defb 0x89, 0x4A, 0x00, 0xC3, 0x00, 0x52, 0x91, 0x00

cannon_gfx:                         ; 16x8, two bytes a line; its middle is x + 7
        defb 0x01, 0x00
        defb 0x03, 0x80
        defb 0x03, 0x80
        defb 0x3F, 0xF8
        defb 0x7F, 0xFC
        defb 0x7F, 0xFC
        defb 0x7F, 0xFC
        defb 0x7F, 0xFC

wreck_gfx:                          ; the cannon hit by a bomb
        defb 0x04, 0x40
        defb 0x21, 0x08
        defb 0x08, 0x90
        defb 0x12, 0x44
        defb 0x05, 0xA0
        defb 0x2F, 0xF4
        defb 0x7F, 0xFE
        defb 0xFF, 0xFF

title_texts:
        defb 2, 6, col_title
        defb "S T A R   G U A R D", 0
        defb 5, 2, col_text
        defb "THE INVADERS ARE COMING DOWN:", 0
        defb 6, 2, col_text
        defb "SHOOT THEM BEFORE THEY LAND!", 0
        defb 9, 12, col_text
        defb "= 30 POINTS", 0
        defb 10, 12, col_text
        defb "= 20 POINTS", 0
        defb 11, 12, col_text
        defb "= 10 POINTS", 0
        defb 14, 8, col_keys
        defb "O       - LEFT", 0
        defb 15, 8, col_keys
        defb "P       - RIGHT", 0
        defb 16, 8, col_keys
        defb "M/SPACE - FIRE", 0
        defb 17, 5, col_keys
        defb "OR A KEMPSTON JOYSTICK", 0
        defb 20, 6, col_flash
        defb "PRESS SPACE TO START", 0
        defb 22, 3, col_low
        defb "3 LIVES - A BOMB COSTS ONE", 0
        defb 0xFF

hud_texts:
        defb 0, 0, col_text
        defb "SCORE", 0
        defb 0, 13, col_text
        defb "WAVE", 0
        defb 0, 24, col_text
        defb "LIVES", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
