"""The lowering layer (compile time only): fused groups, weight prepacking, kernel lowering
(group -> te -> tir), the kernel cache, the execution plan, linking and export."""
