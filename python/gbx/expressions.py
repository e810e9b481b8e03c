"""Reward and episode-end expressions compiled into the kernel.

``gbx.VecEnv(..., reward=EXPR, done=EXPR, track=[EXPR, ...])`` takes C++ *expressions*
(not statements) over a read-only view of each env's machine, evaluated in the kernel after
every step (and after every reset, so ``prev`` starts from the reset state):

===================  ===========================================================
name                 value
===================  ===========================================================
``a f b c d e h l``  8-bit registers after the step
``pc sp``            16-bit registers
``ram(addr)``        the byte at ``addr & 0xFFFF`` in the memory view (no side effects;
                     VRAM and OAM as held even while the PPU locks them)
``ram16(addr)``      ``ram(addr) | ram(addr + 1) << 8`` (little-endian)
``val(i)``           tracked value ``track[i]`` now (reward/done only)
``prev(i)``          ``track[i]`` at the end of the previous step (reward/done only)
``popcount(lo, hi)`` bits set in the bytes ``lo..hi`` (inclusive, integer literals)
``sum(lo, hi)``      sum of the bytes ``lo..hi`` (inclusive, integer literals)
``bcd(addr, n)``     ``n`` (1..8) bytes of big-endian packed BCD from ``addr``
``seen(key)``        1 the first time this episode ``key`` is produced, else 0
                     (``seen_capacity=`` keys, exact; see docs/rewards.md)
``seen_count()``     keys in this episode's set
``hit(i)``           fetches at ``hooks[i]`` during this step (``hooks=[...]``)
===================  ===========================================================

Operators: ``+ - * / & | ^ ~ ! << >> < > <= >= == != && || ?:`` and parentheses; integer
(decimal, ``0x`` hex) and float literals. ``/`` always divides as float, so a division by
zero gives inf instead of killing the process; ``%`` is refused (use ``&`` with a power of
two). Nothing else is accepted: no assignment, ``++``, commas (except between the literal
arguments of popcount, sum and bcd), braces, brackets, strings,
comments, or names outside the table. Each expression is checked before any C++ is
generated, and compiler errors name the expression and its own line (``<reward>:1:...``).

``reward`` is converted to float32 (it replaces the stage's reward_v0); ``done`` is true
when non-zero (``terminated`` in ``step``). Up to 8 ``track`` expressions (float32 each).

Example: reward the increase of a 16-bit score, end the episode when lives reach 0::

    env = gbx.VecEnv(rom, 64, track=["ram16(0xC0A0)"],
                     reward="val(0) - prev(0)", done="ram(0xC0A2) == 0")
"""
