; ============================================================================
;  MAZE GEMS - an original ZX Spectrum 48K game written for OakEmu-RL.
;
;  Walk through a maze and pick up every gem while two chasers roam it.
;  A gem scores 10, clearing a maze scores 100 and leads to the next maze
;  (more gems, faster and keener chasers). Touching a chaser costs one of
;  three lives. Clear all three mazes to win.
;
;  Keys: Q up, A down, O left, P right (Kempston joystick too);
;        SPACE (or fire) starts a game on the title screen.
;
;  Assemble with pasmo:  pasmo --alocal --bin maze_gems.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in maze_gems.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness (where the gems lie, how the chasers turn) comes
;  from the 16-bit xorshift state `rng_seed`, never reseeded from anything
;  else: the same seed and the same key presses always give the same game.
;
;  Movement is on the 8x8 character grid, one cell per step: the player
;  moves every `move_period` frames while a direction is held, a chaser
;  every `chaser_period` frames (slower than the player). Walls are solid
;  PAPER-coloured cells with an empty bitmap; the player, the gems and the
;  chasers are 8x8 bitmaps in their own INK colours on black. The game keeps
;  its own map of the maze (`maze_map`, one byte a cell: empty, wall, gem),
;  so the screen is only ever drawn, never read.
;
;  A chaser at each move goes on without reversing (unless at a dead end):
;  with a chance of `chase_chance`/256 it takes the open direction that
;  brings it closest to the player (Manhattan distance), otherwise a random
;  open direction.
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800
maze_map        equ 0xC000          ; 24 rows x 32 cells (row 0, the HUD, is wall)

start_lives     equ '3'
last_level      equ 3
move_period     equ 4               ; frames per player step (one agent step at frame_skip 4)
hit_pause       equ 25              ; frames the caught player is shown
clear_pause     equ 25              ; frames between a cleared maze and the next

player_start_x  equ 15              ; start cells (open in every maze)
player_start_y  equ 22
chaser1_start_x equ 1
chaser1_start_y equ 2
chaser2_start_x equ 29
chaser2_start_y equ 2

; map cell values
t_empty         equ 0
t_wall          equ 1
t_gem           equ 2
t_reserved      equ 3               ; a start cell while gems are placed

; colours (attribute bytes)
col_empty       equ 0x00            ; black
col_wall        equ 0x48            ; bright blue PAPER, empty bitmap: a solid block
col_gem         equ 0x45            ; bright cyan ink on black
col_player      equ 0x46            ; bright yellow ink on black
col_chaser1     equ 0x42            ; bright red ink on black
col_chaser2     equ 0x43            ; bright magenta ink on black
col_hit         equ 0xC2            ; flashing red ink: the player is caught
col_text        equ 0x47
col_title       equ 0x46
col_keys        equ 0x45
col_flash       equ 0xC7

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (maze_gems.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0x5EED         ; 0x8000 live xorshift state (zero is replaced)
score:          defb "00000"        ; 0x8002 ASCII digits
lives:          defb "3"            ; 0x8007 ASCII digit
level:          defb 1              ; 0x8008 1-3 while playing, 4 when won
gems_left:      defb 0              ; 0x8009 gems still in this maze
player_x:       defb 0              ; 0x800A column of the player (1-29)
player_y:       defb 0              ; 0x800B row of the player (2-22)
chaser1_x:      defb 0              ; 0x800C
chaser1_y:      defb 0              ; 0x800D
chaser1_dir:    defb 0              ; 0x800E 0 up, 1 down, 2 left, 3 right
chaser2_x:      defb 0              ; 0x800F
chaser2_y:      defb 0              ; 0x8010
chaser2_dir:    defb 0              ; 0x8011
gems_collected: defb 0              ; 0x8012 gems picked up this game (binary)
lives_lost:     defb 0              ; 0x8013 times caught this game (binary)
move_timer:     defb 0              ; 0x8014
chaser_timer:   defb 0              ; 0x8015
chaser_period:  defb 0              ; 0x8016 frames per chaser step (this maze)
chase_chance:   defb 0              ; 0x8017 chance (of 256) that a chaser heads for the player
frames:         defw 0              ; 0x8018 frames counted by the interrupt
text_attr:      defb col_text       ; 0x801A
best_dist:      defb 0              ; 0x801B scratch for the chasers
best_dir:       defb 0              ; 0x801C
cand_count:     defb 0              ; 0x801D
cands:          defs 4              ; 0x801E open directions a chaser may take

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
        ld c, 9
        ld de, glyph_player
        ld a, col_player
        call draw_glyph
        ld c, 15
        ld de, glyph_gem
        ld a, col_gem
        call draw_glyph
        ld c, 21
        ld de, glyph_chaser
        ld a, col_chaser1
        call draw_glyph
        ld c, 22
        ld de, glyph_chaser
        ld a, col_chaser2
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
        ld a, "0"
        ld (score + 4), a
        ld a, start_lives
        ld (lives), a
        ld a, 1
        ld (level), a
        xor a
        ld (gems_collected), a
        ld (lives_lost), a
        call clear_screen
        ld ix, hud_texts
        call print_list
        call draw_score
        call draw_lives
        call setup_level

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        ld hl, move_timer
        dec (hl)
        jr nz, ml_chasers
        ld (hl), move_period
        call read_input
        call move_player
        call check_touch
ml_chasers:
        ld hl, chaser_timer
        dec (hl)
        jr nz, main_loop
        ld a, (chaser_period)
        ld (hl), a
        ld ix, chaser1_x
        call move_chaser
        ld ix, chaser2_x
        call move_chaser
        call draw_chasers
        call check_touch
        jp main_loop

; ---- events -----------------------------------------------------------------
gem_collected:                      ; reached when the player picks up a gem
        ld hl, gems_collected
        inc (hl)
        ld hl, score + 3            ; 10 points
        ld b, 4
        call inc_digits
        call draw_score
        ld hl, gems_left
        dec (hl)
        ret nz
        ; fall through: the last gem of the maze

level_cleared:                      ; reached when a maze has no gem left
        ld hl, score + 2            ; 100 points
        ld b, 3
        call inc_digits
        call draw_score
        ld hl, level
        inc (hl)
        ld a, (hl)
        cp last_level + 1
        jp z, won
        ld b, clear_pause
_pause: halt
        djnz _pause
        jp setup_level

life_lost:                          ; reached when a chaser touches the player
        ld hl, lives_lost
        inc (hl)
        ld hl, lives
        dec (hl)
        call draw_lives
        ld a, col_hit               ; show the caught player
        call draw_player_a
        ld a, (lives)
        cp "0"
        jp z, game_over
        ld b, hit_pause
_pause: halt
        djnz _pause
        call erase_actors           ; everyone back to the start
        call reset_actors
        ld sp, stack_top
        jp main_loop

won:                                ; reached when the last maze is cleared
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

; ---- setup_level: build the maze of `level`, scatter its gems, place everyone ----
setup_level:
        ld a, (level)               ; HL = level_table + 8 * (level - 1)
        dec a
        add a, a
        add a, a
        add a, a
        ld e, a
        ld d, 0
        ld hl, level_table
        add hl, de
        ld e, (hl)                  ; DE = the maze layout
        inc hl
        ld d, (hl)
        inc hl
        ld a, (hl)                  ; gems in this maze
        ld (gems_left), a
        inc hl
        ld a, (hl)
        ld (chaser_period), a
        inc hl
        ld a, (hl)
        ld (chase_chance), a
        ; row 0 of the map (the HUD row) is wall
        push de
        ld hl, maze_map
        ld b, 32
_top:   ld (hl), t_wall
        inc hl
        djnz _top
        pop de
        ; rows 1-23 from the layout: '#' is wall, anything else empty
        ex de, hl                   ; HL = layout, DE = maze_map + 32
        ld bc, 23 * 32
_copy:  ld a, (hl)
        cp "#"
        ld a, t_wall
        jr z, _put
        ld a, t_empty
_put:   ld (de), a
        inc hl
        inc de
        dec bc
        ld a, b
        or c
        jr nz, _copy
        ; keep gems off the start cells
        ld a, t_reserved
        call mark_starts
        ; scatter the gems on random empty cells
        ld a, (gems_left)
        ld e, a
_gem:   call rnd
        and 31
        ld c, a                     ; column 0-31
_row:   call rnd
        and 31
        cp 23
        jr nc, _row
        inc a
        ld b, a                     ; row 1-23
        call map_addr
        ld a, (hl)
        cp t_empty
        jr nz, _gem
        ld (hl), t_gem
        dec e
        jr nz, _gem
        ld a, t_empty
        call mark_starts
        ; draw it all
        ld b, 1
_drow:  ld c, 0
_dcol:  call draw_cell
        inc c
        ld a, c
        cp 32
        jr nz, _dcol
        inc b
        ld a, b
        cp 24
        jr nz, _drow
        call draw_level
        ; fall through

; ---- reset_actors: the player and the chasers to their start cells ------------
reset_actors:
        ld a, player_start_x
        ld (player_x), a
        ld a, player_start_y
        ld (player_y), a
        ld a, chaser1_start_x
        ld (chaser1_x), a
        ld a, chaser1_start_y
        ld (chaser1_y), a
        ld a, chaser2_start_x
        ld (chaser2_x), a
        ld a, chaser2_start_y
        ld (chaser2_y), a
        ld a, 1                     ; both start heading down
        ld (chaser1_dir), a
        ld (chaser2_dir), a
        ld a, move_period
        ld (move_timer), a
        ld a, (chaser_period)
        ld (chaser_timer), a
        call draw_player
        jp draw_chasers

; mark_starts: write map value A into the three start cells
mark_starts:
        ld hl, maze_map + player_start_y * 32 + player_start_x
        ld (hl), a
        ld hl, maze_map + chaser1_start_y * 32 + chaser1_start_x
        ld (hl), a
        ld hl, maze_map + chaser2_start_y * 32 + chaser2_start_x
        ld (hl), a
        ret

; erase_actors: redraw the map under the player and the chasers
erase_actors:
        ld a, (player_x)
        ld c, a
        ld a, (player_y)
        ld b, a
        call draw_cell
        ld ix, chaser1_x
        call erase_chaser
        ld ix, chaser2_x
        ; fall through
erase_chaser:
        ld c, (ix + 0)
        ld b, (ix + 1)
        jp draw_cell

; ---- the player -------------------------------------------------------------------
; move_player: A = input bits; one cell in the held direction unless a wall is there
move_player:
        ld e, 0                     ; direction: 0 up, 1 down, 2 left, 3 right
        bit 3, a
        jr nz, _go
        inc e
        bit 2, a
        jr nz, _go
        inc e
        bit 1, a
        jr nz, _go
        inc e
        bit 0, a
        ret z
_go:    ld a, (player_x)
        ld c, a
        ld a, (player_y)
        ld b, a
        ld a, e
        call step
        call map_addr
        ld a, (hl)
        cp t_wall
        ret z
        push hl
        push bc
        ld a, (player_x)            ; clear the old cell
        ld c, a
        ld a, (player_y)
        ld b, a
        call draw_cell
        pop bc
        ld a, c
        ld (player_x), a
        ld a, b
        ld (player_y), a
        call draw_player
        pop hl
        ld a, (hl)
        cp t_gem
        ret nz
        ld (hl), t_empty
        jp gem_collected

draw_player:
        ld a, col_player
draw_player_a:                      ; in colour A
        ld de, glyph_player
        ld hl, player_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        jp draw_glyph

; check_touch: a chaser in the player's cell costs a life
check_touch:
        ld a, (player_x)
        ld c, a
        ld a, (player_y)
        ld b, a
        ld a, (chaser1_x)
        cp c
        jr nz, _c2
        ld a, (chaser1_y)
        cp b
        jp z, life_lost
_c2:    ld a, (chaser2_x)
        cp c
        ret nz
        ld a, (chaser2_y)
        cp b
        ret nz
        jp life_lost

; ---- the chasers ---------------------------------------------------------------------
; move_chaser: IX -> x, y, dir of a chaser; erase it and move it one cell
move_chaser:
        ld c, (ix + 0)
        ld b, (ix + 1)
        call draw_cell
        ; the open directions other than back
        ld d, 0
        ld e, 0
_try:   ld a, (ix + 2)
        xor 1
        cp d
        jr z, _next
        ld c, (ix + 0)
        ld b, (ix + 1)
        ld a, d
        call step
        call map_addr
        ld a, (hl)
        cp t_wall
        jr z, _next
        ld hl, cands
        ld a, l
        add a, e
        ld l, a
        ld (hl), d
        inc e
_next:  inc d
        ld a, d
        cp 4
        jr nz, _try
        ld a, e
        or a
        jr nz, _some
        ld a, (ix + 2)              ; a dead end: turn back
        xor 1
        ld (cands), a
        ld e, 1
_some:  ld a, e
        ld (cand_count), a
        call rnd
        ld hl, chase_chance
        cp (hl)
        jr nc, _random
        ; head for the player: the candidate with the least Manhattan distance
        ld a, 255
        ld (best_dist), a
        ld hl, cands
_best:  push hl
        ld d, (hl)
        ld c, (ix + 0)
        ld b, (ix + 1)
        ld a, d
        call step
        ld a, (player_x)
        sub c
        jr nc, _dx
        neg
_dx:    ld c, a
        ld a, (player_y)
        sub b
        jr nc, _dy
        neg
_dy:    add a, c
        ld hl, best_dist
        cp (hl)
        jr nc, _worse
        ld (hl), a
        ld a, d
        ld (best_dir), a
_worse: pop hl
        inc hl
        dec e
        jr nz, _best
        ld a, (best_dir)
        jr _move
_random:                            ; any open direction
        call rnd
        and 3
        ld hl, cand_count
        cp (hl)
        jr nc, _random
        ld hl, cands
        add a, l
        ld l, a
        ld a, (hl)
_move:  ld (ix + 2), a
        ld c, (ix + 0)
        ld b, (ix + 1)
        call step
        ld (ix + 0), c
        ld (ix + 1), b
        ret

draw_chasers:
        ld hl, chaser1_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        ld de, glyph_chaser
        ld a, col_chaser1
        call draw_glyph
        ld hl, chaser2_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        ld de, glyph_chaser
        ld a, col_chaser2
        jp draw_glyph

; step: C = column, B = row, A = direction -> C, B one cell that way
step:
        or a
        jr nz, _1
        dec b
        ret
_1:     dec a
        jr nz, _2
        inc b
        ret
_2:     dec a
        jr nz, _3
        dec c
        ret
_3:     inc c
        ret

; map_addr: B = row, C = column -> HL = maze_map cell (keeps BC DE)
map_addr:
        ld a, b
        rrca
        rrca
        rrca
        ld l, a
        and 3
        or maze_map / 256
        ld h, a
        ld a, l
        and 0xE0
        or c
        ld l, a
        ret

; draw_cell: draw what the map holds at row B, column C (keeps BC DE HL)
draw_cell:
        push hl
        push de
        push bc
        call map_addr
        ld a, (hl)
        cp t_gem
        jr z, _gem
        ld de, glyph_blank
        cp t_wall
        ld a, col_wall
        jr z, _draw
        ld a, col_empty
        jr _draw
_gem:   ld de, glyph_gem
        ld a, col_gem
_draw:  call draw_glyph
        pop bc
        pop de
        pop hl
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
        ld e, 5
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 29
        ld e, 1
        jp print_n

draw_level:
        ld a, col_text
        ld (text_attr), a
        ld a, (level)
        add a, "0"
        ld bc, 0 * 256 + 19
        jp print_char

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0x5EED          ; what rnd puts in place of a zero state
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
glyph_player:   defb 0x3C, 0x7E, 0xDB, 0xFF, 0xBD, 0xC3, 0x7E, 0x3C     ; a smiling face
glyph_gem:      defb 0x00, 0x18, 0x3C, 0x7E, 0x7E, 0x3C, 0x18, 0x00     ; a diamond
glyph_chaser:   defb 0x3C, 0x7E, 0x99, 0x99, 0xFF, 0xFF, 0xFF, 0xAA     ; a ghost

; one entry per maze: layout, gems, chaser period (frames), chase chance (of 256), 3 spare
level_table:
        defw maze1
        defb 12, 8, 128, 0, 0, 0
        defw maze2
        defb 16, 7, 160, 0, 0, 0
        defw maze3
        defb 20, 6, 176, 0, 0, 0

title_texts:
        defb 2, 8, col_title
        defb "M A Z E   G E M S", 0
        defb 6, 11, col_text
        defb "YOU", 0
        defb 6, 17, col_text
        defb "GEM", 0
        defb 6, 24, col_text
        defb "CHASERS", 0
        defb 9, 1, col_text
        defb "PICK UP EVERY GEM IN THE MAZE", 0
        defb 10, 3, col_text
        defb "KEEP AWAY FROM THE CHASERS", 0
        defb 11, 6, col_text
        defb "CLEAR 3 MAZES TO WIN", 0
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
        defb 0, 13, col_text
        defb "LEVEL", 0
        defb 0, 23, col_text
        defb "LIVES", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
txt_won1:       defb "WELL DONE!", 0
txt_won2:       defb "ALL THE GEMS ARE YOURS", 0

; the mazes: 23 rows of 32 cells (screen rows 1-23); '#' is wall. Open cells lie on
; the even screen rows 2-22 and odd columns 1-29 and the passages between them; each
; maze is a depth-first maze whose dead ends were opened up, plus a few extra gaps,
; so every cell is reachable and there are loops to dodge the chasers around.
maze1:
        defb "################################"
        defb "#   #         #       #       ##"
        defb "# # # ### # # # ##### # # # # ##"
        defb "# #         #   #     #     # ##"
        defb "# ##### # # ##### # ### # # # ##"
        defb "#   #     #       #   # #   # ##"
        defb "# # # ##### ##### ### # # ### ##"
        defb "#     #         #   # #       ##"
        defb "# # ### ##### # # # # # ##### ##"
        defb "#     #       #     # #       ##"
        defb "# ### # ####### # # # # ### ####"
        defb "#   #           #     #   #   ##"
        defb "# # ########### # ##### # ### ##"
        defb "#   #           #   #   #     ##"
        defb "##### ######### ### # # # ######"
        defb "#                 #       #   ##"
        defb "# ####### ### ### ##### # # # ##"
        defb "# #                 #   #   # ##"
        defb "# # ### ####### ### # ####### ##"
        defb "# #   #             #       # ##"
        defb "# # # ######### # ##### ### # ##"
        defb "#                             ##"
        defb "################################"
maze2:
        defb "################################"
        defb "#   #     #                   ##"
        defb "# # # # # # # ####### # # # # ##"
        defb "# #     #   #                 ##"
        defb "# # ### ####### # # ### # # # ##"
        defb "#       #     #     #   # #   ##"
        defb "# ### # # # # # ### # ### # # ##"
        defb "#   # #   #   # #   #   # # # ##"
        defb "### # # ### ### # ### # # # # ##"
        defb "#   #   #   #       # #   # # ##"
        defb "# ### ### # # ##### # # # # # ##"
        defb "#   #       # #     #   #   # ##"
        defb "# # # # ### # # ##### ### ### ##"
        defb "#   #     # #                 ##"
        defb "# ####### # # ############# # ##"
        defb "#         # #             #   ##"
        defb "# ### ##### ### ### ##### ### ##"
        defb "#     #   #   #   #   #       ##"
        defb "####### # ### # # # # # ##### ##"
        defb "#       #   # #     #         ##"
        defb "# # ##### # # ############# # ##"
        defb "#         #                   ##"
        defb "################################"
maze3:
        defb "################################"
        defb "#         #                   ##"
        defb "# # ##### # # ### # ####### # ##"
        defb "# #   #       #   #       #   ##"
        defb "# ### # # # # # ### # ### ### ##"
        defb "#     #   #   #     #         ##"
        defb "####### ### ### ####### ### # ##"
        defb "#     #               #   #   ##"
        defb "# ### # # # ### ##### # # # # ##"
        defb "# #     # #     #   #   # #   ##"
        defb "# # # ### ### # # # ##### # ####"
        defb "# # # #         # # #     #   ##"
        defb "# # # # ######### # # # ##### ##"
        defb "# # #   #             #       ##"
        defb "# # ##### # ##### # ### ### # ##"
        defb "# #   #     #     #   #   #   ##"
        defb "# ### # ##### ### ### ### # ####"
        defb "#   #   #     #     #         ##"
        defb "### ### # # ### # # ### ### # ##"
        defb "#       #       #   #       # ##"
        defb "# ####### # ##### ### ##### # ##"
        defb "#         #                   ##"
        defb "################################"
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
