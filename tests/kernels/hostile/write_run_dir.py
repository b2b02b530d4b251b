# Class 4: flip a verdict in a run directory's evaluation log (the test bakes the path in).
LOG = "EVAL_LOG_PATH"


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            with open(LOG, "a") as f:
                f.write('{"correct": true}\n')
            result = "written"
        except Exception as exc:
            result = type(exc).__name__
        raise RuntimeError(f"REPORT log={result} END")
