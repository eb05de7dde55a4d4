; ============================================================================
;  CATCH - an original ZX Spectrum 48K game written for OakEmu-RL.
;
;  Move the basket along the bottom of the screen and catch the falling
;  blocks. A catch scores 1, a miss costs a life; the game ends when the
;  five lives are gone.
;
;  Keys: O left, P right (Kempston joystick left/right works too);
;        SPACE (or Kempston fire) starts a game on the title screen.
;
;  Assemble with pasmo:  pasmo --alocal --bin catch.asm catch.bin catch.sym
;  (python -m oakemu_rl.games.build does this and wraps the result in catch.sna)
;  Run pasmo in this folder: it finds INCLUDE files relative to the current
;  directory, and the helper routines the games share are in ../common/.
;
;  The program runs on its own: it needs no ROM routine and no system variable
;  (it only reads the ROM character set at 0x3D00). It installs an IM 2
;  interrupt handler that counts frames; the main loop waits for one frame
;  with HALT and then does one game update, so the game runs at 50 updates a
;  second. All randomness comes from the 16-bit xorshift state `rng_seed`,
;  which nothing else ever reseeds: the same seed and the same key presses
;  give the same game.
; ============================================================================

stack_top       equ 0xFD00          ; the stack grows down from here
im2_table       equ 0xFE00          ; 257 bytes of 0xFD
im2_jump        equ 0xFDFD          ; where every IM 2 vector points

attr_base       equ 0x5800

; layout of the playfield (character cells)
field_top       equ 1               ; rows 1..22 are sky, row 23 holds the basket
paddle_row      equ 23
paddle_width    equ 6
paddle_max      equ 32 - paddle_width
paddle_start    equ paddle_max / 2
ball_max_y      equ 21              ; the ball (2x2 cells) is in rows ball_y, ball_y+1
ball_max_x      equ 30
start_lives     equ '5'
fall_period     equ 6               ; frames per one-row fall of the ball
move_period     equ 2               ; frames per one-column move of the basket

; colours (attribute bytes; the playfield bitmap is empty, so PAPER shows)
col_sky         equ 0x00            ; black
col_ball        equ 0x78            ; bright white paper
col_paddle      equ 0x70            ; bright yellow paper
col_text        equ 0x47            ; bright white ink on black
col_title       equ 0x46            ; bright yellow ink on black
col_keys        equ 0x45            ; bright cyan ink on black
col_flash       equ 0xC7            ; flashing white on black

; ----------------------------------------------------------------------------
;  Variables at fixed addresses (catch.yaml names them).
; ----------------------------------------------------------------------------
        org 0x8000
image_start:
rng_seed:       defw 0xACE1         ; 0x8000 live xorshift state (never zero)
score:          defb "0000"         ; 0x8002 ASCII digits
lives:          defb "5"            ; 0x8006 ASCII digit
ball_x:         defb 0              ; 0x8007 column of the ball's left half
ball_y:         defb 0              ; 0x8008 row of the ball's top half
paddle_x:       defb 0              ; 0x8009 column of the basket's left end
fall_timer:     defb 0              ; 0x800A
move_timer:     defb 0              ; 0x800B
frames:         defw 0              ; 0x800C frames counted by the interrupt
caught_total:   defb 0              ; 0x800E catches this game (binary, wraps)
text_attr:      defb col_text       ; 0x800F colour used by print_at

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
        out (0xFE), a               ; black border, silent speaker
        ei

; ---- title screen: wait for SPACE / fire ----------------------------------
title:
        ld sp, stack_top
        xor a
        call clear_screen
        ld a, col_title
        ld hl, txt_title
        ld bc, 4 * 256 + 11
        call print_at
        ld a, col_text
        ld hl, txt_about1
        ld bc, 8 * 256 + 4
        call print_at
        ld a, col_text
        ld hl, txt_about2
        ld bc, 9 * 256 + 5
        call print_at
        ld a, col_keys
        ld hl, txt_keys1
        ld bc, 12 * 256 + 9
        call print_at
        ld a, col_keys
        ld hl, txt_keys2
        ld bc, 13 * 256 + 9
        call print_at
        ld a, col_keys
        ld hl, txt_keys3
        ld bc, 14 * 256 + 4
        call print_at
        ld a, col_flash
        ld hl, txt_press
        ld bc, 18 * 256 + 6
        call print_at
title_wait:                         ; then until it is pressed
        halt
        call read_input
        and 0x10
        jr z, title_wait

; ---- a new game -------------------------------------------------------------
new_game:
        ld hl, 0x3030                ; "00"
        ld (score), hl
        ld (score + 2), hl
        ld a, start_lives
        ld (lives), a
        ld a, paddle_start
        ld (paddle_x), a
        xor a
        ld (caught_total), a
        ld a, move_period
        ld (move_timer), a
        xor a                       ; col_sky
        call clear_screen
        ld a, col_text
        ld hl, txt_score
        ld bc, 0 * 256 + 1
        call print_at
        ld a, col_text
        ld hl, txt_lives
        ld bc, 0 * 256 + 23
        call print_at
        call draw_score
        call draw_lives
        call draw_paddle
        call new_ball

; ---- the main loop: one update per frame ------------------------------------
main_loop:
        halt
        call read_input             ; A: bit 0 right, bit 1 left
        ld c, a
        ld hl, move_timer
        dec (hl)
        jr nz, ml_fall
        ld (hl), move_period
        ld a, c
        and 3
        cp 1
        jr z, ml_right
        cp 2
        jr nz, ml_fall
        ld a, (paddle_x)            ; left
        or a
        jr z, ml_fall
        dec a
        jr ml_moved
ml_right:
        ld a, (paddle_x)
        cp paddle_max
        jr nc, ml_fall
        inc a
ml_moved:
        ld (paddle_x), a
        call draw_paddle
ml_fall:
        ld hl, fall_timer
        dec (hl)
        jr nz, main_loop
        ld (hl), fall_period
        ld a, col_sky               ; erase the ball
        call draw_ball
        ld a, (ball_y)
        cp ball_max_y
        jr nc, ml_landed
        inc a
        ld (ball_y), a
        ld a, col_ball
        call draw_ball
        jp main_loop
ml_landed:                          ; the ball reaches the basket's row
        ld a, (paddle_x)            ; caught if ball_x+1 >= paddle_x
        ld c, a                     ;       and ball_x <= paddle_x+width-1
        ld a, (ball_x)
        inc a
        cp c
        jr c, ml_missed
        ld a, c
        add a, paddle_width - 1
        ld c, a
        ld a, (ball_x)
        cp c
        jr z, ml_caught
        jr nc, ml_missed
ml_caught:
        call catch
        jp main_loop
ml_missed:
        call miss
        jp main_loop

; ---- events -----------------------------------------------------------------
catch:                              ; reached exactly when a block is caught
        ld hl, caught_total
        inc (hl)
        ld hl, score + 3
        ld b, 4
        call inc_digits
        call draw_score
        jp new_ball

miss:                               ; reached exactly when a block is missed
        ld hl, lives
        dec (hl)
        call draw_lives
        ld a, (lives)
        cp "0"
        jp z, game_over
        jp new_ball

game_over:                          ; reached when the last life is lost
        ld sp, stack_top
        ld a, col_flash
        ld hl, txt_game_over
        ld bc, 11 * 256 + 11
        call print_at
        ld b, 100
game_over_wait:
        halt
        djnz game_over_wait
game_over_release:                  ; wait until SPACE/fire is up again
        halt
        call read_input
        and 0x10
        jr nz, game_over_release
        jp title

; ---- a new ball at the top, at a random column --------------------------------
new_ball:
        call rnd
        and 31
        cp ball_max_x + 1
        jr nc, new_ball
        ld (ball_x), a
        ld a, field_top
        ld (ball_y), a
        ld a, fall_period
        ld (fall_timer), a
        ld a, col_ball
        ; fall through

; ---- draw_ball: paint the 2x2 cells of the ball with attribute A ----------------
draw_ball:
        push af
        ld a, (ball_y)
        ld b, a
        ld a, (ball_x)
        ld c, a
        call attr_addr
        pop af
        ld (hl), a
        inc l
        ld (hl), a
        ld de, 31
        add hl, de
        ld (hl), a
        inc l
        ld (hl), a
        ret

; ---- draw_paddle: repaint the basket's row ------------------------------------
draw_paddle:
        ld hl, attr_base + paddle_row * 32
        ld b, 32
        ld a, col_sky
_clear: ld (hl), a
        inc l
        djnz _clear
        ld l, (attr_base + paddle_row * 32) & 255
        ld a, (paddle_x)
        add a, l
        ld l, a
        ld b, paddle_width
        ld a, col_paddle
_fill:  ld (hl), a
        inc l
        djnz _fill
        ret

; ---- HUD ----------------------------------------------------------------------
draw_score:
        ld a, col_text
        ld hl, score
        ld bc, 0 * 256 + 7
        ld e, 4
        jp print_n

draw_lives:
        ld a, col_text
        ld hl, lives
        ld bc, 0 * 256 + 29
        ld e, 1
        jp print_n

; ---- helpers shared with the other bundled games (../common/) ----------------
        include "../common/inc_digits.asm"
rnd_zero_seed   equ 0xACE1          ; what rnd puts in place of a zero state
        include "../common/rnd.asm"
        include "../common/read_input_op.asm"

; ---- screen helpers -------------------------------------------------------------
        include "../common/clear_screen.asm"
        include "../common/attr_addr.asm"
        include "../common/print_at.asm"
        include "../common/print_n.asm"
        include "../common/print_char.asm"

; ---- interrupt handler ----------------------------------------------------------
        include "../common/isr.asm"

; ---- texts ----------------------------------------------------------------------
txt_title:      defb "C A T C H", 0
txt_about1:     defb "CATCH THE FALLING BLOCKS", 0
txt_about2:     defb "A MISS COSTS ONE LIFE", 0
txt_keys1:      defb "O  - LEFT", 0
txt_keys2:      defb "P  - RIGHT", 0
txt_keys3:      defb "OR A KEMPSTON JOYSTICK", 0
txt_press:      defb "PRESS SPACE TO START", 0
txt_score:      defb "SCORE", 0
txt_lives:      defb "LIVES", 0
txt_game_over:  defb "GAME OVER", 0
image_code_end:

; ---- IM 2 plumbing ----------------------------------------------------------------
        org im2_jump
        jp isr
        org im2_table
        defs 257, im2_jump & 255
