# Class 4: signal the test runner and the judge (their pids are baked in by the test, as an attacker
# that found them would), and report what happened.
import signal

RUNNER_PID = 0
JUDGE_PID = 0


def send(pid, sig):
    try:
        os.kill(pid, sig)
        return "sent"
    except Exception as exc:
        return type(exc).__name__


class ModelNew(nn.Module):
    def forward(self, x):
        a = send(RUNNER_PID, signal.SIGUSR1)
        b = send(JUDGE_PID, signal.SIGKILL)
        c = send(os.getppid(), signal.SIGKILL)
        raise RuntimeError(f"REPORT runner={a} judge={b} parent={c} END")
