"""Capture a call in a CUDA graph and check that its replays equal eager execution, bit for bit.

The capture follows PyTorch's whole-network recipe (docs: "CUDA Graphs", torch.cuda.graph): warm up on a side stream
so that lazy initialisation and the allocator's first requests happen outside the capture, make the capture wait for
that work, then capture one call. Needs a CUDA device. `static_input` is what `function` takes: a CUDA tensor, or a
tuple of them (`function(static_input)` is called as given).
"""

import torch

from .compare import bitwise_equal


def capture(function, static_input, warmup: int = 2) -> tuple["torch.cuda.CUDAGraph", object]:
    """Run function(static_input) `warmup` times on a side stream, then capture one call; return (graph, static
    output).

    Replaying the graph reruns the captured kernels on whatever `static_input` then holds and writes the result into
    the static output; nothing is reallocated, so a new input must be copied into `static_input`.
    """
    side_stream = torch.cuda.Stream()
    side_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side_stream):
        for _ in range(warmup):
            function(static_input)
    torch.cuda.current_stream().wait_stream(side_stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = function(static_input)
    return graph, static_output


def replays_equal_eager(graph, function, static_input, static_output, new_inputs) -> list[bool]:
    """For each tensor of new_inputs: copy it into static_input, replay, synchronise, and compare static_output
    bitwise (tileblend.compare.bitwise_equal) with function(static_input.clone()); one bool per input."""
    equal = []
    for new_input in new_inputs:
        static_input.copy_(new_input)
        graph.replay()
        torch.cuda.synchronize()
        replayed = static_output.clone()
        equal.append(bitwise_equal(function(static_input.clone()), replayed))
    return equal
