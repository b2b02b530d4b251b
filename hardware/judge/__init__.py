"""The judge: the process that owns the references and issues every verdict (never importing a candidate).

pool.py is the caller's side (`WorkerPool`, `evaluate`: judge processes started and fed jobs);
process.py is a judge process's entry, server.py its `Judge` (serving jobs), job.py one job's typed record,
reference.py the reference cache, session.py the calls into one candidate process, verification.py and
timing.py the two stages, compare.py the tolerance table, evidence.py what a forward was seen to do
(fingerprint.py the keyed sums it and the reference cache read writes from),
inputs.py, records.py, tensors.py, device.py their helpers, static_check.py the checks on source text.
A new judge check goes into verification.py (what ran) or static_check.py (what the source says).
"""
