; ============================================================================
;  FOREST RUN - an original ZX Spectrum 48K game written for OakEmu-RL,
;  in the spirit of the classic forest chases.
;
;  You ride up through a forest (the trees stream down the screen). Steer
;  between the trees, shoot the rider ahead of you for a bonus, and survive
;  eight sectors; each sector is denser and faster than the one before.
;  Hitting a tree costs one of three lives.
;
;  Keys: O left, P right, SPACE fire (Kempston joystick left/right/fire too).
;        SPACE (or fire) starts a game on the title screen.
;
;  Scoring: 1 point for every row ridden, 50 for shooting the rider,
;           100 for finishing a sector.
;
;  Assemble with pasmo:  pasmo --alocal --bin forest_run.asm out.bin out.sym
;  (python -m oakemu_rl.games.build does this and wraps it in forest_run.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: no ROM routine, no system variable (it reads
;  only the ROM character set). An IM 2 interrupt handler counts frames; the
;  main loop waits for a frame with HALT, then does one game update (50 per
;  second). All randomness comes from the 16-bit xorshift state `rng_seed`,
;  used as the live generator state and never reseeded from anything else:
;  the same seed and the same key presses always give the same ride.
;
;  Graphics are cheap to update: every playfield cell holds the same tree
;  bitmap, so a cell is a tree, grass, the player, the rider or a bullet
;  depending on its attribute byte alone. Scrolling the forest is one LDDR of
;  704 attribute bytes; sprites are attribute blocks that remember the
;  attributes under them.
; ============================================================================

stack_top       equ 0xFD00
im2_table       equ 0xFE00
im2_jump        equ 0xFDFD
attr_base       equ 0x5800

field_top       equ 1               ; rows 1..23 are forest, row 0 is the HUD
field_cells     equ 32 * 23         ; attribute cells of the playfield
player_row      equ 20              ; the player is 2x2 cells: rows 20 and 21
rider_row       equ 3               ; the rider is 2x1 cells
bullet_row      equ player_row      ; a new bullet starts here and moves up at once
player_max_x    equ 30
sector_rows     equ 120             ; rows to ride through in each sector
last_sector     equ 8
start_lives     equ '3'
steer_period    equ 2               ; frames per one-column move of the player
rider_period    equ 3               ; frames per one-column move of the rider
rider_respawn   equ 100             ; frames before a shot rider comes back
crash_pause     equ 25              ; frames the crash is shown

col_grass       equ 0x00            ; black: the tree bitmap is invisible
col_tree        equ 0x44            ; bright green ink on black
col_player      equ 0x76            ; solid bright yellow
col_rider       equ 0x5B            ; solid bright magenta
col_bullet      equ 0x7F            ; solid bright white
col_crash       equ 0x52            ; solid bright red
col_text        equ 0x47
col_title       equ 0x46
col_keys        equ 0x45
col_green       equ 0x44
col_flash       equ 0xC7

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (forest_run.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0x1D2B         ; 0x8000 live xorshift state (zero is replaced)
score:          defb "000000"       ; 0x8002 ASCII digits
lives:          defb "3"            ; 0x8008 ASCII digit
sector:         defb 1              ; 0x8009 1..8 while riding, 9 = won
rows_left:      defw sector_rows    ; 0x800A rows left in this sector
player_x:       defb 15             ; 0x800C column of the player's left half
scroll_period:  defb 4              ; 0x800D frames per row scrolled
scroll_timer:   defb 4              ; 0x800E
density:        defb 0              ; 0x800F chance (of 256) of a tree in a lane
spawn_phase:    defb 0              ; 0x8010 0, 1: tree rows; 2: gap
spawn_mask:     defw 0              ; 0x8011 lanes with a tree in this row
steer_timer:    defb 1              ; 0x8013
bullet_on:      defb 0              ; 0x8014
bullet_x:       defb 0              ; 0x8015
bullet_y:       defb 0              ; 0x8016
rider_on:       defb 0              ; 0x8017
rider_x:        defb 0              ; 0x8018
rider_dir:      defb 1              ; 0x8019 +1 or -1
rider_timer:    defb 1              ; 0x801A
rider_wait:     defb 0              ; 0x801B frames until the rider returns
frames:         defw 0              ; 0x801C frames counted by the interrupt
text_attr:      defb col_text       ; 0x801E
input:          defb 0              ; 0x801F last input bits
riders_hit:     defb 0              ; 0x8020 riders shot this game (binary)
crashes:        defb 0              ; 0x8021 trees hit this game (binary)
; sprite records: address of the top-left attribute (high byte 0 = not drawn),
; width, height, then the attributes saved from under the sprite
spr_player:     defw 0
                defb 2, 2
                defs 4
spr_rider:      defw 0
                defb 2, 1
                defs 4
spr_bullet:     defw 0
                defb 1, 1
                defs 4

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
        ld (score + 4), hl
        ld a, start_lives
        ld (lives), a
        ld a, 1
        ld (sector), a
        ld a, 15
        ld (player_x), a
        xor a
        ld (bullet_on), a
        ld (rider_on), a
        ld (riders_hit), a
        ld (crashes), a
        ld (spr_player + 1), a
        ld (spr_rider + 1), a
        ld (spr_bullet + 1), a
        ld a, 2                     ; the next scroll starts a tree row
        ld (spawn_phase), a
        ld a, 50
        ld (rider_wait), a
        ld a, 1
        ld (steer_timer), a
        ld (rider_timer), a
        xor a
        call clear_screen
        call fill_field
        ld ix, hud_texts
        call print_list
        call draw_score
        call draw_lives
        call set_sector
        ld a, (scroll_period)
        ld (scroll_timer), a
        call draw_sprites

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        call erase_sprites
        call read_input
        ld (input), a
        ; steering
        ld hl, steer_timer
        dec (hl)
        jr nz, ml_scroll
        ld (hl), steer_period
        and 3
        cp 1
        jr z, ml_right
        cp 2
        jr nz, ml_scroll
        ld a, (player_x)            ; left
        or a
        jr z, ml_scroll
        dec a
        ld (player_x), a
        jr ml_scroll
ml_right:
        ld a, (player_x)
        cp player_max_x
        jr nc, ml_scroll
        inc a
        ld (player_x), a
ml_scroll:
        ld hl, scroll_timer
        dec (hl)
        call z, scroll_tick
        call update_rider
        ; fire: a new bullet when none is flying
        ld a, (input)
        and 0x10
        jr z, ml_bullet
        ld a, (bullet_on)
        or a
        jr nz, ml_bullet
        inc a
        ld (bullet_on), a
        ld a, bullet_row
        ld (bullet_y), a
        ld a, (player_x)
        ld (bullet_x), a
ml_bullet:
        call update_bullet
        call check_player
        call draw_sprites
        jp main_loop

; ---- events -----------------------------------------------------------------
crash:                              ; reached when the player hits a tree
        ld hl, crashes
        inc (hl)
        ld hl, lives
        dec (hl)
        call draw_lives
        xor a
        ld (bullet_on), a
        ld a, (player_x)            ; show the wreck
        ld c, a
        ld b, player_row
        call attr_addr
        ld a, col_crash
        ld (hl), a
        inc l
        ld (hl), a
        ld de, 31
        add hl, de
        ld (hl), a
        inc l
        ld (hl), a
        ld b, crash_pause
_pause: halt
        djnz _pause
        ld a, (lives)
        cp "0"
        jp z, game_over
        call clear_field            ; a fresh stretch of forest
        ld a, 2
        ld (spawn_phase), a
        ld a, (scroll_period)
        ld (scroll_timer), a
        ret

hit_rider:                          ; reached when a bullet hits the rider
        xor a
        ld (bullet_on), a
        ld (rider_on), a
        ld a, rider_respawn
        ld (rider_wait), a
        ld hl, riders_hit
        inc (hl)
        ld b, 5                     ; 50 points: five times ten
_add:   push bc
        ld hl, score + 4
        ld b, 5
        call inc_digits
        pop bc
        djnz _add
        jp draw_score

next_sector:                        ; reached when a sector has been ridden through
        ld hl, score + 3            ; 100 points
        ld b, 4
        call inc_digits
        call draw_score
        ld hl, sector
        inc (hl)
        ld a, (hl)
        cp last_sector + 1
        jp z, won
        jp set_sector

won:                                ; reached when the last sector is done
        ld sp, stack_top
        call draw_sector
        ld a, col_flash
        ld hl, txt_won1
        ld bc, 10 * 256 + 11
        call print_at
        ld a, col_text
        ld hl, txt_won2
        ld bc, 12 * 256 + 4
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

; ---- one row of scrolling ---------------------------------------------------------
scroll_tick:
        ld a, (scroll_period)
        ld (scroll_timer), a
        ld hl, attr_base + 23 * 32 - 1      ; rows 1..22 move down to rows 2..23
        ld de, attr_base + 24 * 32 - 1
        ld bc, 22 * 32
        lddr
        ld a, (spawn_phase)
        inc a
        cp 3
        jr c, _phase
        xor a
_phase: ld (spawn_phase), a
        or a
        jr nz, _keep
        ld de, 0                    ; phase 0: choose the lanes of a new tree row
        ld b, 16
_pick:  call rnd
        ld hl, density
        cp (hl)                     ; carry: a tree in this lane
        rl e
        rl d
        djnz _pick
        ld (spawn_mask), de
        jr _draw
_keep:  ld de, 0                    ; phase 2: a gap row
        cp 1
        jr nz, _draw
        ld de, (spawn_mask)         ; phase 1: the second row of the same trees
_draw:  ld hl, attr_base + 32       ; paint row 1 from the mask in DE
        ld b, 16
_lane:  sla e
        rl d
        ld a, col_grass
        jr nc, _cell
        ld a, col_tree
_cell:  ld (hl), a
        inc l
        ld (hl), a
        inc l
        djnz _lane
        ld hl, score + 5            ; one point per row
        ld b, 6
        call inc_digits
        call draw_score
        ld hl, (rows_left)
        dec hl
        ld (rows_left), hl
        ld a, h
        or l
        ret nz
        jp next_sector

; ---- the rider ahead ----------------------------------------------------------------
update_rider:
        ld a, (rider_on)
        or a
        jr nz, _move
        ld hl, rider_wait
        dec (hl)
        ret nz
_spawn: call rnd
        and 31
        cp player_max_x + 1
        jr nc, _spawn
        ld (rider_x), a
        ld a, 1
        ld (rider_on), a
        ld (rider_timer), a
        ld a, l                     ; direction from another random bit
        and 1
        add a, a
        dec a                       ; -1 or +1
        ld (rider_dir), a
        ret
_move:  ld hl, rider_timer
        dec (hl)
        ret nz
        ld (hl), rider_period
        call rnd
        cp 24                       ; sometimes turn round
        jr nc, _step
        ld a, (rider_dir)
        neg
        ld (rider_dir), a
_step:  ld hl, rider_dir
        ld a, (rider_x)
        add a, (hl)
        cp player_max_x + 1
        jr c, _moved
        ld a, (hl)                  ; off the edge: turn round
        neg
        ld (hl), a
        ld a, (rider_x)
        add a, (hl)
_moved: ld (rider_x), a
        ret

; ---- the bullet ------------------------------------------------------------------------
update_bullet:
        ld a, (bullet_on)
        or a
        ret z
        ld a, (bullet_y)
        dec a
        ld (bullet_y), a
        cp field_top
        jr c, _gone
        cp rider_row
        jr nz, _tree
        ld a, (rider_on)
        or a
        jr z, _tree
        ld a, (rider_x)
        ld c, a
        ld a, (bullet_x)
        sub c
        cp 2
        jp c, hit_rider
_tree:  ld a, (bullet_y)
        ld b, a
        ld a, (bullet_x)
        ld c, a
        call attr_addr
        ld a, (hl)
        cp col_tree
        ret nz
_gone:  xor a
        ld (bullet_on), a
        ret

; ---- collision of the player with the trees -----------------------------------------
check_player:
        ld a, (player_x)
        ld c, a
        ld b, player_row
        call attr_addr
        ld a, col_tree
        cp (hl)
        jp z, crash
        inc l
        cp (hl)
        jp z, crash
        ld de, 31
        add hl, de
        cp (hl)
        jp z, crash
        inc l
        cp (hl)
        jp z, crash
        ret

; ---- sprites -------------------------------------------------------------------------
draw_sprites:
        ld a, (player_x)
        ld c, a
        ld b, player_row
        call attr_addr
        ld ix, spr_player
        ld a, col_player
        call sprite_draw
        ld a, (rider_on)
        or a
        jr z, _bullet
        ld a, (rider_x)
        ld c, a
        ld b, rider_row
        call attr_addr
        ld ix, spr_rider
        ld a, col_rider
        call sprite_draw
_bullet:
        ld a, (bullet_on)
        or a
        ret z
        ld a, (bullet_y)
        ld b, a
        ld a, (bullet_x)
        ld c, a
        call attr_addr
        ld ix, spr_bullet
        ld a, col_bullet
        jp sprite_draw

erase_sprites:                      ; in the reverse order of drawing
        ld ix, spr_bullet
        call sprite_erase
        ld ix, spr_rider
        call sprite_erase
        ld ix, spr_player
        jp sprite_erase

; sprite_draw: IX = record, HL = top-left attribute address, A = colour
sprite_draw:
        ld (ix + 0), l
        ld (ix + 1), h
        ld c, a
        push ix
        pop de
        inc de
        inc de
        inc de
        inc de                      ; DE = saved attributes
        ld b, (ix + 3)
_row:   push bc
        push hl
        ld b, (ix + 2)
_col:   ld a, (hl)
        ld (de), a
        inc de
        ld (hl), c
        inc l
        djnz _col
        pop hl
        ld a, l
        add a, 32
        ld l, a
        jr nc, _next
        inc h
_next:  pop bc
        djnz _row
        ret

; sprite_erase: IX = record; puts back the saved attributes
sprite_erase:
        ld l, (ix + 0)
        ld h, (ix + 1)
        ld a, h
        or a
        ret z
        ld (ix + 1), 0
        push ix
        pop de
        inc de
        inc de
        inc de
        inc de
        ld b, (ix + 3)
_row:   push bc
        push hl
        ld b, (ix + 2)
_col:   ld a, (de)
        ld (hl), a
        inc de
        inc l
        djnz _col
        pop hl
        ld a, l
        add a, 32
        ld l, a
        jr nc, _next
        inc h
_next:  pop bc
        djnz _row
        ret

; ---- sector settings --------------------------------------------------------------------
set_sector:
        ld a, (sector)
        dec a
        ld e, a
        ld d, 0
        ld hl, sector_periods
        add hl, de
        ld a, (hl)
        ld (scroll_period), a
        ld hl, sector_density
        add hl, de
        ld a, (hl)
        ld (density), a
        ld hl, sector_rows
        ld (rows_left), hl
        ; fall through
draw_sector:
        ld a, col_text
        ld (text_attr), a
        ld a, (sector)
        add a, "0"
        ld bc, 0 * 256 + 21
        jp print_char

; ---- HUD ---------------------------------------------------------------------------------
draw_score:
        ld a, col_text
        ld hl, score
        ld bc, 0 * 256 + 6
        ld e, 6
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 30
        ld e, 1
        jp print_n

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0x1D2B          ; what rnd puts in place of a zero state
        include "../common/rnd.asm"
        include "../common/read_input_op.asm"

; ---- screen helpers --------------------------------------------------------------------
        include "../common/clear_screen.asm"

; clear_field: every playfield attribute becomes grass
clear_field:
        ld hl, attr_base + field_top * 32
        ld de, attr_base + field_top * 32 + 1
        ld bc, field_cells - 1
        ld (hl), col_grass
        ldir
        ret

; fill_field: put the tree bitmap into every playfield cell
fill_field:
        ld b, field_top
_row:   ld a, b                     ; DE = bitmap address of (row B, column 0)
        and 0x18
        or 0x40
        ld d, a
        ld a, b
        and 7
        rrca
        rrca
        rrca
        ld e, a
        ld hl, tree_glyph
        push bc
        ld c, 8
_line:  push de
        ld b, 16
_pair:  ld a, (hl)
        ld (de), a
        inc e
        inc hl
        ld a, (hl)
        ld (de), a
        inc e
        dec hl
        djnz _pair
        pop de
        inc d
        inc hl
        inc hl
        dec c
        jr nz, _line
        pop bc
        inc b
        ld a, b
        cp 24
        jr c, _row
        ret

; attr_addr and the text helpers, shared with the other bundled games (../common/)
        include "../common/attr_addr.asm"
        include "../common/print_list.asm"
        include "../common/print_at.asm"
        include "../common/print_n.asm"
        include "../common/print_char.asm"

; ---- interrupt handler --------------------------------------------------------------------
        include "../common/isr.asm"

; ---- data ----------------------------------------------------------------------------------
sector_periods: defb 4, 4, 4, 3, 3, 3, 2, 2     ; frames per row, sectors 1..8
sector_density: defb 16, 20, 24, 28, 32, 36, 40, 46 ; tree chance per lane (of 256)

tree_glyph:                         ; a 16x8 fir: left and right bytes per line
        defb 0x01, 0x80
        defb 0x03, 0xC0
        defb 0x07, 0xE0
        defb 0x0F, 0xF0
        defb 0x1F, 0xF8
        defb 0x3F, 0xFC
        defb 0x7F, 0xFE
        defb 0x01, 0x80

title_texts:
        defb 2, 6, col_title
        defb "F O R E S T   R U N", 0
        defb 5, 4, col_text
        defb "RIDE THROUGH THE FOREST,", 0
        defb 6, 3, col_text
        defb "DODGE THE TREES AND SHOOT", 0
        defb 7, 3, col_text
        defb "THE RIDER AHEAD FOR A BONUS.", 0
        defb 8, 5, col_text
        defb "SURVIVE ALL 8 SECTORS!", 0
        defb 11, 9, col_keys
        defb "O     - LEFT", 0
        defb 12, 9, col_keys
        defb "P     - RIGHT", 0
        defb 13, 9, col_keys
        defb "SPACE - FIRE", 0
        defb 14, 5, col_keys
        defb "OR A KEMPSTON JOYSTICK", 0
        defb 18, 6, col_flash
        defb "PRESS SPACE TO START", 0
        defb 21, 8, col_green
        defb "3 LIVES, 8 SECTORS", 0
        defb 0xFF

hud_texts:
        defb 0, 0, col_text
        defb "SCORE", 0
        defb 0, 14, col_text
        defb "SECTOR", 0
        defb 0, 24, col_text
        defb "LIVES", 0
        defb 0xFF

txt_game_over:  defb "GAME OVER", 0
txt_won1:       defb "WELL DONE!", 0
txt_won2:       defb "YOU RODE THROUGH THE FOREST", 0
image_code_end:

; ---- IM 2 plumbing ---------------------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
