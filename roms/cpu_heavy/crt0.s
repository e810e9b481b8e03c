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

;; Link order: code and read-only data in ROM bank 0, then RAM.
	.area	_HOME
	.area	_CODE
	.area	_INITIALIZER
	.area	_GSINIT
	.area	_GSFINAL
	.area	_DATA
	.area	_INITIALIZED
	.area	_BSEG
	.area	_BSS
	.area	_HEAP

	.area	_GSINIT
gsinit::
	ld	hl, #s__DATA		; C: globals without an initializer start at 0
	ld	de, #l__DATA
2$:	ld	a, d
	or	a, e
	jr	z, 3$
	xor	a, a
	ld	(hl+), a
	dec	de
	jr	2$
3$:	ld	hl, #s__INITIALIZED	; globals with one: copied from ROM
	ld	de, #s__INITIALIZER
	ld	bc, #l__INITIALIZER
4$:	ld	a, b
	or	a, c
	jr	z, 5$
	ld	a, (de)
	ld	(hl+), a
	inc	de
	dec	bc
	jr	4$
5$:
	.area	_GSFINAL
	ret
