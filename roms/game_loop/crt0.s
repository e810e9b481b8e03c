;; Start-up code and interrupt vectors of the game-shaped test ROM (sdasgb syntax). makebin -Z
;; writes the cartridge header over 0x0104-0x014F; execution starts at 0x0100.
	.module	crt0
	.globl	_main
	.globl	_vblank_isr
	.globl	_timer_isr

	.area	_HEADER (ABS)
	.org	0x0040			; VBlank
	push	af
	push	bc
	push	de
	push	hl
	call	_vblank_isr
	pop	hl
	pop	de
	pop	bc
	pop	af
	reti
	.org	0x0050			; timer
	push	af
	push	bc
	push	de
	push	hl
	call	_timer_isr
	pop	hl
	pop	de
	pop	bc
	pop	af
	reti
	.org	0x0100
	nop
	jp	init
	.org	0x0150
init:
	di
	ld	sp, #0xE000
	call	gsinit
	call	_main
1$:	halt
	nop
	jr	1$

	.include	"../common/c_runtime.inc"
