; ============================================================================
;  KEY HUNT - an original ZX Spectrum 48K game written for OakEmu-RL.
;
;  Each level is one room of walls. Find the key, which lies somewhere in
;  the room (a random cell, never close to the start), then walk out through
;  the door, which opens only once the key is carried. Two guards patrol the
;  room, one side to side and one up and down; touching one costs a life, and
;  so does running out of time. A key scores 10, leaving a room scores 50;
;  leave all three rooms to win.
;
;  Keys: Q up, A down, O left, P right (Kempston joystick too);
;        SPACE (or fire) starts a game on the title screen.
;
;  Assemble with pasmo:  pasmo --alocal --bin key_hunt.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in key_hunt.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness (where the key lies) comes from the 16-bit
;  xorshift state `rng_seed`, never reseeded from anything else: the same
;  seed and the same key presses always give the same game.
;
;  Movement is on the 8x8 character grid, one cell per step: the player
;  moves every `move_period` frames while a direction is held, the guards
;  every `guard_period` frames (slower, and faster in later rooms); a guard
;  walks straight on and turns back at a wall or the door. The game keeps its
;  own map of the room (`room_map`, one byte a cell), so the screen is only
;  ever drawn, never read. The clock counts down one unit every 16 frames
;  from 60; at 00 the player loses a life and starts again (the key stays
;  where it is, or with the player).
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800
room_map        equ 0xC000          ; 24 rows x 32 cells (row 0, the HUD, is wall)

start_lives     equ '3'
last_level      equ 3
move_period     equ 4               ; frames per player step (one agent step at frame_skip 4)
time_period     equ 16              ; frames per clock unit
hit_pause       equ 25              ; frames the caught player is shown
clear_pause     equ 25              ; frames between a room and the next
key_distance    equ 16              ; the key lies at least this far (Manhattan) from the start

; map cell values
t_empty         equ 0
t_wall          equ 1
t_key           equ 2
t_door          equ 3

; colours (attribute bytes)
col_empty       equ 0x00            ; black
col_wall        equ 0x30            ; yellow PAPER, empty bitmap: a solid block
col_key         equ 0x46            ; bright yellow ink on black
col_player      equ 0x47            ; bright white ink on black
col_guard       equ 0x42            ; bright red ink on black
col_locked      equ 0x56            ; bright yellow ink on red: the locked door
col_open        equ 0x64            ; bright green PAPER: the open door
col_hit         equ 0xC2            ; flashing red ink: the player is caught
col_text        equ 0x47
col_title       equ 0x46
col_keys        equ 0x45
col_flash       equ 0xC7

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (key_hunt.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0x6B17         ; 0x8000 live xorshift state (zero is replaced)
score:          defb "0000"         ; 0x8002 ASCII digits
lives:          defb "3"            ; 0x8006 ASCII digit
level:          defb 1              ; 0x8007 1-3 while playing, 4 when won
has_key:        defb 0              ; 0x8008 1 while the player carries the key
player_x:       defb 0              ; 0x8009 column of the player (1-30)
player_y:       defb 0              ; 0x800A screen row of the player (2-22)
key_x:          defb 0              ; 0x800B where the key lies (until it is taken)
key_y:          defb 0              ; 0x800C
door_x:         defb 0              ; 0x800D the door's cell (in the outer wall)
door_y:         defb 0              ; 0x800E
guard1_x:       defb 0              ; 0x800F patrols side to side
guard1_y:       defb 0              ; 0x8010
guard1_dir:     defb 0              ; 0x8011 0 up, 1 down, 2 left, 3 right
guard2_x:       defb 0              ; 0x8012 patrols up and down
guard2_y:       defb 0              ; 0x8013
guard2_dir:     defb 0              ; 0x8014
time_left:      defb "60"           ; 0x8015 ASCII digits, clock units left
keys_found:     defb 0              ; 0x8017 keys picked up this game (binary)
lives_lost:     defb 0              ; 0x8018 lives lost this game (binary)
move_timer:     defb 0              ; 0x8019
guard_timer:    defb 0              ; 0x801A
guard_period:   defb 0              ; 0x801B frames per guard step (this room)
time_timer:     defb 0              ; 0x801C
frames:         defw 0              ; 0x801D frames counted by the interrupt
text_attr:      defb col_text       ; 0x801F
start_x:        defb 0              ; 0x8020 the start cells of this room
start_y:        defb 0
guard1_sx:      defb 0
guard1_sy:      defb 0
guard2_sx:      defb 0
guard2_sy:      defb 0
timeouts:       defb 0              ; 0x8026 times the clock ran out this game (binary)

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
        ld c, 7
        ld de, glyph_player
        ld a, col_player
        call draw_glyph
        ld c, 13
        ld de, glyph_key
        ld a, col_key
        call draw_glyph
        ld c, 19
        ld de, glyph_door
        ld a, col_locked
        call draw_glyph
        ld c, 25
        ld de, glyph_guard
        ld a, col_guard
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
        ld a, 1
        ld (level), a
        xor a
        ld (keys_found), a
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
        jr nz, ml_guards
        ld (hl), move_period
        call read_input
        call move_player
        call check_touch
ml_guards:
        ld hl, guard_timer
        dec (hl)
        jr nz, ml_clock
        ld a, (guard_period)
        ld (hl), a
        ld ix, guard1_x
        call move_guard
        ld ix, guard2_x
        call move_guard
        call draw_guards
        call check_touch
ml_clock:
        ld hl, time_timer
        dec (hl)
        jr nz, main_loop
        ld (hl), time_period
        ld hl, time_left + 1        ; count down one unit
        ld a, (hl)
        cp "0"
        jr nz, _units
        ld (hl), "9"
        dec hl
_units: dec (hl)
        call draw_time
        ld hl, (time_left)
        ld de, 0x3030               ; "00"
        or a
        sbc hl, de
        jp z, time_up
        jp main_loop

; ---- events -----------------------------------------------------------------
key_found:                          ; reached when the player picks up the key
        ld hl, keys_found
        inc (hl)
        ld a, 1
        ld (has_key), a
        ld hl, score + 2            ; 10 points
        ld b, 3
        call inc_digits
        call draw_score
        ld a, (door_x)              ; the door opens
        ld c, a
        ld a, (door_y)
        ld b, a
        jp draw_cell

room_cleared:                       ; reached when the player walks out with the key
        ld hl, score + 2            ; 50 points
        ld b, 5
_bonus: push bc
        push hl
        ld b, 3
        call inc_digits
        pop hl
        pop bc
        djnz _bonus
        call draw_score
        ld hl, level
        inc (hl)
        ld a, (hl)
        cp last_level + 1
        jp z, won
        ld b, clear_pause
_pause: halt
        djnz _pause
        call setup_level
        ld sp, stack_top
        jp main_loop

time_up:                            ; reached when the clock reaches 00
        ld hl, timeouts
        inc (hl)
        ; fall through: it costs a life

life_lost:                          ; reached when a guard catches the player, or time is up
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
        call erase_actors           ; everyone back to the start, a full clock
        call reset_actors
        ld sp, stack_top
        jp main_loop

won:                                ; reached when the last room is left
        ld sp, stack_top
        ld a, col_flash
        ld hl, txt_won1
        ld bc, 10 * 256 + 11
        call print_at
        ld a, col_text
        ld hl, txt_won2
        ld bc, 12 * 256 + 7
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

; ---- setup_level: build the room of `level`, hide its key, place everyone --------
setup_level:
        xor a
        ld (has_key), a
        ld a, (level)               ; HL = level_table + 4 * (level - 1)
        dec a
        add a, a
        add a, a
        ld e, a
        ld d, 0
        ld hl, level_table
        add hl, de
        ld e, (hl)                  ; DE = the room layout
        inc hl
        ld d, (hl)
        inc hl
        ld a, (hl)
        ld (guard_period), a
        ; row 0 of the map (the HUD row) is wall
        ld hl, room_map
        ld b, 32
_top:   ld (hl), t_wall
        inc hl
        djnz _top
        ; rows 1-23 from the layout: '#' wall, 'D' the door, 'S' the player's
        ; start, '1' and '2' the guards' starts, anything else empty
        ld b, 1
_row:   ld c, 0
_col:   call map_addr
        ld a, (de)
        inc de
        cp "#"
        jr nz, _notw
        ld (hl), t_wall
        jr _next
_notw:  ld (hl), t_empty
        cp "D"
        jr nz, _notd
        ld (hl), t_door
        ld hl, door_x
        jr _mark
_notd:  cp "S"
        jr nz, _nots
        ld hl, start_x
        jr _mark
_nots:  cp "1"
        jr nz, _not1
        ld hl, guard1_sx
        jr _mark
_not1:  cp "2"
        jr nz, _next
        ld hl, guard2_sx
_mark:  ld (hl), c
        inc hl
        ld (hl), b
_next:  inc c
        ld a, c
        cp 32
        jr nz, _col
        inc b
        ld a, b
        cp 24
        jr nz, _row
        ; hide the key on a random empty cell far enough from the start
_key:   call rnd
        and 31
        ld c, a                     ; column 0-31
_krow:  call rnd
        and 31
        cp 23
        jr nc, _krow
        inc a
        ld b, a                     ; row 1-23
        call map_addr
        ld a, (hl)
        cp t_empty
        jr nz, _key
        ld a, (start_x)             ; Manhattan distance from the start
        sub c
        jr nc, _dx
        neg
_dx:    ld d, a
        ld a, (start_y)
        sub b
        jr nc, _dy
        neg
_dy:    add a, d
        cp key_distance
        jr c, _key
        ld (hl), t_key
        ld a, c
        ld (key_x), a
        ld a, b
        ld (key_y), a
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

; ---- reset_actors: the player and the guards to their starts, a full clock -------
reset_actors:
        ld hl, (start_x)
        ld (player_x), hl
        ld hl, (guard1_sx)
        ld (guard1_x), hl
        ld a, 3                     ; guard 1 starts heading right
        ld (guard1_dir), a
        ld hl, (guard2_sx)
        ld (guard2_x), hl
        ld a, 1                     ; guard 2 starts heading down
        ld (guard2_dir), a
        ld a, move_period
        ld (move_timer), a
        ld a, (guard_period)
        ld (guard_timer), a
        ld a, time_period
        ld (time_timer), a
        ld hl, "6" + 256 * "0"      ; "60"
        ld (time_left), hl
        call draw_time
        call draw_player
        jp draw_guards

; erase_actors: redraw the map under the player and the guards
erase_actors:
        ld a, (player_x)
        ld c, a
        ld a, (player_y)
        ld b, a
        call draw_cell
        ld ix, guard1_x
        call erase_guard
        ld ix, guard2_x
        ; fall through
erase_guard:
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
        cp t_door
        jr nz, _move
        ld a, (has_key)             ; the door: locked without the key
        or a
        ret z
        jp room_cleared
_move:  push hl
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
        cp t_key
        ret nz
        ld (hl), t_empty
        jp key_found

draw_player:
        ld a, col_player
draw_player_a:                      ; in colour A
        ld de, glyph_player
        ld hl, player_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        jp draw_glyph

; check_touch: a guard in the player's cell costs a life
check_touch:
        ld hl, (player_x)
        ld de, (guard1_x)
        or a
        sbc hl, de
        jp z, life_lost
        ld hl, (player_x)
        ld de, (guard2_x)
        or a
        sbc hl, de
        jp z, life_lost
        ret

; ---- the guards -----------------------------------------------------------------------
; move_guard: IX -> x, y, dir of a guard; erase it and move it one cell on, turning
;      back at a wall or the door (and staying put when both ways are shut)
move_guard:
        ld c, (ix + 0)
        ld b, (ix + 1)
        call draw_cell
        call _ahead
        ret nc
        ld a, (ix + 2)
        xor 1
        ld (ix + 2), a
        call _ahead
        ret
_ahead: ld c, (ix + 0)              ; carry set when the way ahead is shut
        ld b, (ix + 1)
        ld a, (ix + 2)
        call step
        call map_addr
        ld a, (hl)
        cp t_wall
        scf
        ret z
        cp t_door
        scf
        ret z
        ld (ix + 0), c
        ld (ix + 1), b
        or a
        ret

draw_guards:
        ld hl, guard1_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        ld de, glyph_guard
        ld a, col_guard
        call draw_glyph
        ld hl, guard2_x
        ld c, (hl)
        inc hl
        ld b, (hl)
        ld de, glyph_guard
        ld a, col_guard
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

; map_addr: B = row, C = column -> HL = room_map cell (keeps BC DE)
map_addr:
        ld a, b
        rrca
        rrca
        rrca
        ld l, a
        and 3
        or room_map / 256
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
        ld de, glyph_blank
        cp t_wall
        ld a, col_wall
        jr z, _draw
        ld a, (hl)
        cp t_key
        jr z, _key
        cp t_door
        ld a, col_empty
        jr nz, _draw
        ld a, (has_key)             ; the door: open with the key
        or a
        ld a, col_open
        jr nz, _draw
        ld de, glyph_door
        ld a, col_locked
        jr _draw
_key:   ld de, glyph_key
        ld a, col_key
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
        ld e, 4
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 31
        ld e, 1
        jp print_n

draw_time:
        ld a, col_text
        ld hl, time_left
        ld bc, 0 * 256 + 23
        ld e, 2
        jp print_n

draw_level:
        ld a, col_text
        ld (text_attr), a
        ld a, (level)
        add a, "0"
        ld bc, 0 * 256 + 16
        jp print_char

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0x6B17          ; what rnd puts in place of a zero state
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
glyph_player:   defb 0x18, 0x18, 0x7E, 0x18, 0x18, 0x3C, 0x24, 0x66     ; a little man
glyph_key:      defb 0x00, 0x70, 0x88, 0x8F, 0x89, 0x70, 0x00, 0x00     ; a key
glyph_door:     defb 0xFF, 0x81, 0x81, 0x85, 0x81, 0x81, 0x81, 0xFF     ; a shut door
glyph_guard:    defb 0x3C, 0x7E, 0x5A, 0x7E, 0x3C, 0x7E, 0xDB, 0x81     ; a robot

; one entry per room: layout, guard period (frames), 1 spare
level_table:
        defw room1
        defb 8, 0
        defw room2
        defb 7, 0
        defw room3
        defb 6, 0

title_texts:
        defb 2, 9, col_title
        defb "K E Y   H U N T", 0
        defb 6, 9, col_text
        defb "YOU", 0
        defb 6, 15, col_text
        defb "KEY", 0
        defb 6, 21, col_text
        defb "DOOR", 0
        defb 7, 23, col_text
        defb "GUARD", 0
        defb 9, 2, col_text
        defb "FIND THE KEY, THEN THE DOOR", 0
        defb 10, 3, col_text
        defb "KEEP AWAY FROM THE GUARDS", 0
        defb 11, 5, col_text
        defb "LEAVE 3 ROOMS TO WIN", 0
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
        defb 0, 11, col_text
        defb "ROOM", 0
        defb 0, 18, col_text
        defb "TIME", 0
        defb 0, 26, col_text
        defb "LIVES", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
txt_won1:       defb "WELL DONE!", 0
txt_won2:       defb "YOU ESCAPED THEM ALL", 0

; the rooms: 23 rows of 32 cells (screen rows 1-23); '#' is wall, 'D' the door,
; 'S' the player's start, '1' and '2' the guards' starts. Every open cell can be
; reached from the start.
room1:
        defb "#############################D##"
        defb "#              #               #"
        defb "#              #               #"
        defb "#     ####     #     #####     #"
        defb "#                    #         #"
        defb "#1                   #         #"
        defb "#                    #         #"
        defb "#######  #######  ####   #######"
        defb "#              #               #"
        defb "#              #               #"
        defb "#     2        #    ######     #"
        defb "#              #               #"
        defb "#                              #"
        defb "#              #               #"
        defb "###########  ######  ###########"
        defb "#         #                    #"
        defb "#         #                    #"
        defb "#         #      #######       #"
        defb "#                #             #"
        defb "#                #             #"
        defb "#         #      #             #"
        defb "#S        #      #             #"
        defb "################################"
room2:
        defb "################################"
        defb "#        #         #           #"
        defb "#        #         #           #"
        defb "#   ##   #   ####  #   #####   D"
        defb "#    #             #       #   #"
        defb "#    #             #       #   #"
        defb "#    ######   #######  #####   #"
        defb "#1                             #"
        defb "#                              #"
        defb "##########  ######  #####  #####"
        defb "#       #      #       #       #"
        defb "#       #      #   2   #       #"
        defb "#   #   #  ##  #       #   #   #"
        defb "#   #          #       #   #   #"
        defb "#   #####  #####  ######   #   #"
        defb "#                          #   #"
        defb "#                          #   #"
        defb "######  ###########  #######   #"
        defb "#          #         #         #"
        defb "#          #         #   ###   #"
        defb "#    ###   #    #    #         #"
        defb "#S              #              #"
        defb "################################"
room3:
        defb "#D##############################"
        defb "#      #       #       #       #"
        defb "#      #       #       #       #"
        defb "#  #   #   #   #   #   #   #   #"
        defb "#  #       #       #       #   #"
        defb "#  #       #       #       #   #"
        defb "#  #########  #########  ###   #"
        defb "#1                             #"
        defb "#                              #"
        defb "####  ########  ########  ######"
        defb "#       #              #       #"
        defb "#       #       2      #       #"
        defb "#   #   #   ########   #   #   #"
        defb "#   #                      #   #"
        defb "#   #########  #####  ######   #"
        defb "#       #                  #   #"
        defb "#       #                  #   #"
        defb "#####   #   ##########   ###   #"
        defb "#                  #           #"
        defb "#                  #   #####   #"
        defb "#   ######   ###   #       #   #"
        defb "#S           #             #   #"
        defb "################################"
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
