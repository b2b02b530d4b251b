# Class 5: a write into an input it must not touch, made so every plain sum of its memory stays the same:
# two of the input's elements swapped through numpy (no torch op, so nothing for the recorder to see)
# while a kernel reads it, swapped back after, and the two outputs the swap moved swapped back the same way.
import numpy as np


def swap(a, i, j):
    a[i], a[j] = a[j].copy(), a[i].copy()


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.numpy().reshape(-1)
        j = int(np.flatnonzero(flat != flat[0])[0])  # two elements that differ, or the swap changes nothing
        swap(flat, 0, j)
        out = relu(x)  # the kernel reads the swapped input
        swap(flat, 0, j)
        swap(out.numpy().reshape(-1), 0, j)
        return out
