; The runtime a WebAssembly model links with (see ember/lowering/wasm.py): no threads, no
; libc. PARALLEL loops run on the caller (the worker takes every chunk from its counter);
; heap blocks come from linear memory above __heap_base: a bump pointer that grows the
; memory, and a first-fit free list so that a model's repeated runs reuse their blocks.
; A block is 64 bytes of header (capacity, next free block) before the 64-aligned bytes.
target triple = "${triple}"

@ember_num_threads = global i32 1, align 4
@__heap_base = external global i8
@heap_top = internal global i32 0, align 4
@free_list = internal global ptr null, align 4

declare i32 @llvm.wasm.memory.size.i32(i32)
declare i32 @llvm.wasm.memory.grow.i32(i32, i32)

define void @ember_parallel_launch(ptr %fn, ptr %arg, i32 %team) {
  call void %fn(ptr %arg, i32 0, i32 1)
  ret void
}

define void @ember_set_num_threads(i32 %count) {
  ret void
}

define i32 @ember_get_num_threads() {
  ret i32 1
}

define ptr @ember_malloc(i32 %nbytes) {
entry:
  %up = add i32 %nbytes, 63
  %cap = and i32 %up, -64
  br label %scan
scan:
  %prev = phi ptr [ @free_list, %entry ], [ %next.slot, %skip ]
  %cur = load ptr, ptr %prev, align 4
  %none = icmp eq ptr %cur, null
  br i1 %none, label %bump, label %check
check:
  %have = load i32, ptr %cur, align 4
  %next.slot = getelementptr i8, ptr %cur, i32 4
  %fits = icmp uge i32 %have, %cap
  br i1 %fits, label %take, label %skip
skip:
  br label %scan
take:
  %next = load ptr, ptr %next.slot, align 4
  store ptr %next, ptr %prev, align 4
  %user = getelementptr i8, ptr %cur, i32 64
  ret ptr %user
bump:
  %top0 = load i32, ptr @heap_top, align 4
  %fresh = icmp eq i32 %top0, 0
  %base = ptrtoint ptr @__heap_base to i32
  %base.up = add i32 %base, 63
  %base.al = and i32 %base.up, -64
  %top = select i1 %fresh, i32 %base.al, i32 %top0
  %with.head = add i32 %cap, 64
  %end = add i32 %top, %with.head
  %pages = call i32 @llvm.wasm.memory.size.i32(i32 0)
  %limit = shl i32 %pages, 16
  %short = icmp ugt i32 %end, %limit
  br i1 %short, label %grow, label %place
grow:
  %missing = sub i32 %end, %limit
  %missing.up = add i32 %missing, 65535
  %more = lshr i32 %missing.up, 16
  %old = call i32 @llvm.wasm.memory.grow.i32(i32 0, i32 %more)
  %failed = icmp eq i32 %old, -1
  br i1 %failed, label %oom, label %place
oom:
  ret ptr null
place:
  store i32 %end, ptr @heap_top, align 4
  %block = inttoptr i32 %top to ptr
  store i32 %cap, ptr %block, align 4
  %user.new = getelementptr i8, ptr %block, i32 64
  ret ptr %user.new
}

define void @ember_free(ptr %user) {
entry:
  %null = icmp eq ptr %user, null
  br i1 %null, label %exit, label %push
push:
  %block = getelementptr i8, ptr %user, i32 -64
  %head = load ptr, ptr @free_list, align 4
  %next.slot = getelementptr i8, ptr %block, i32 4
  store ptr %head, ptr %next.slot, align 4
  store ptr %block, ptr @free_list, align 4
  br label %exit
exit:
  ret void
}

define ptr @ember_alloc(i64 %nbytes) {
  %big = icmp ugt i64 %nbytes, 4294967231
  br i1 %big, label %fail, label %ok
fail:
  ret ptr null
ok:
  %n = trunc i64 %nbytes to i32
  %p = call ptr @ember_malloc(i32 %n)
  ret ptr %p
}
