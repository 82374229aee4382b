"""Which of PyTorch's operators are bookkeeping (allocation, views, copies), not compute: what the compute census
(harness/child/census.py) and the binary's imports (binary_imports.py) leave out."""

BOOKKEEPING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "view", "_unsafe_view", "reshape",
    "expand", "permute", "transpose", "t", "contiguous", "as_strided", "slice", "select", "unsqueeze", "squeeze",
    "detach", "alias", "copy_", "clone", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "split", "chunk",
    "unbind", "flatten", "unflatten", "narrow", "view_as", "expand_as", "resize_", "set_", "fill_", "zero_",
    "_local_scalar_dense", "item", "is_same_size", "_reshape_alias", "split_with_sizes", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset",
}
