"""The candidate's side of an evaluation: what runs inside one confined candidate process.

runner.py imports the candidate and answers the judge's calls, guard.py watches each forward (fresh memory
poisoned, evidence recorded, tampering checked), timing.py serves timing requests (GPU),
interpreter_fixes.py makes Triton's CPU interpreter compute bf16 as a GPU does.
"""
