"""Registering a torch.nn.Module's weights: its parameters and buffers by state-dict name."""


def register_module(model, module, prefix=""):
    """Register every parameter and persistent buffer of `module` with `model` (a Model) under
    its state-dict name (prefixed by `prefix`), in state-dict order, in place: after
    model.update() (or replicate) the module computes with the new weights, in the same tensor
    storage. A tensor tied under several names (shared weights) is registered once, under its
    first name. Returns the names registered.

    TensorHub writes the tensors' memory directly, behind autograd's back: update a rollout's
    module outside a backward pass (as inference engines do)."""
    seen = set()
    names = []
    for name, tensor in module.state_dict(keep_vars=True).items():
        key = (tensor.device, tensor.data_ptr(), tensor.numel() * tensor.element_size())
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        model.register(prefix + name, tensor)
        names.append(prefix + name)
    return names
