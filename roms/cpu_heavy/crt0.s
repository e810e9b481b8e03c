;; Start-up code for the CPU-heavy test ROM (sdasgb syntax). makebin -Z writes the cartridge
;; header (logo, type, checksums) over 0x0104-0x014F; execution starts at 0x0100.
	.module	crt0
	.globl	_main

	.area	_HEADER (ABS)
	.org	0x0100
	nop
	jp	init

	.org	0x0150
init:
	di
	ld	sp, #0xE000		; stack at the top of WRAM, growing down
	call	gsinit
	call	_main
1$:	halt				; main never returns; if it did, sleep (interrupts are off)
	nop
	jr	1$

	.include	"../common/c_runtime.inc"
