# Class 4: leave a process behind that has left the process group (setsid) and double-forked, so that
# killing the candidate's group would not reach it; it sleeps with a marker in its command line.
MARKER = "kw-hostile-marker-0"


class ModelNew(nn.Module):
    def forward(self, x):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sh", ["/bin/sh", "-c", f"exec -a {MARKER} sleep 600"])
            os._exit(0)
        return relu(x)
