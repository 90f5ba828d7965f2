; The thread pool that PARALLEL loops launch on (see ember/codegen/pool.py).
; A template: its fields (dollar, then the name in braces) are filled in by pool_ir();
; `word` is C's long / size_t / pthread_t (i64, or i32 on 32-bit ARM). The futex calls pass
; their int arguments as i32, as C callers of syscall() do.
; Globals each on their own cache line. `pool_gen` is the job generation (the futex word
; workers sleep on). A worker waits for a generation other than the last it saw: `pool_spin`
; pause loops, then futex sleeps (counted in pool_sleepers, so the launcher only wakes when
; someone sleeps).
; A job is `pool_job` = id << 32 | closed << 31 | entered. A worker whose tid is in the team
; enters a job it has not seen by raising `entered` (compare-and-swap) unless the job is
; closed, runs `fn`, then counts itself in `pool_finished`. The launcher runs `fn` itself,
; closes the job and waits only for the workers that entered: a worker the OS has not
; scheduled yet does not hold up the launch. `fn` takes its iterations from a shared counter
; (codegen/llvm_parallel.py), so whoever is running does the work. The launcher owns the pool
; while `pool_busy` is 1; nested or concurrent launches find it busy and run serially.
target triple = "${triple}"

@pool_gen = internal global i32 0, align 64
@pool_sleepers = internal global i32 0, align 64
@pool_job = internal global i64 0, align 64
@pool_finished = internal global i32 0, align 64
@pool_busy = internal global i32 0, align 64
@pool_master_waiting = internal global i32 0, align 64
@pool_fn = internal global ptr null, align 64
@pool_arg = internal global ptr null, align 8
@pool_team = internal global i32 0, align 4
@pool_workers = global i32 0, align 64
@pool_spin = global i32 ${spin}, align 64
@pool_join_spin = global i32 ${join_spin}, align 64
@pool_threads = internal global [256 x ${word}] zeroinitializer, align 64
; the generation each worker was created in (its first wait is for a newer one)
@pool_start_gen = internal global [257 x i32] zeroinitializer, align 64
@pool_pin = global i32 ${pin}, align 64
@pool_home = internal global i32 -1, align 4
@pool_allowed_ok = internal global i32 0, align 4
@pool_allowed = internal global [16 x i64] zeroinitializer, align 64
@pool_mask = internal global [16 x i64] zeroinitializer, align 64

declare ${word} @syscall(${word}, ...)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @sched_yield()
declare i32 @sched_getcpu()
declare i32 @sched_getaffinity(i32, ${word}, ptr)
declare i32 @pthread_setaffinity_np(${word}, ${word}, ptr)
declare i32 @llvm.smin.i32(i32, i32)
${relax_decl}

; Keep every worker off CPU %cpu (the launcher's): each may run on any other CPU the
; launcher may use. Without it the OS often wakes a worker on the launcher's own CPU,
; where the two take turns instead of running side by side.
define internal void @pool_keep_off(i32 %cpu) {
entry:
  %ok = load i32, ptr @pool_allowed_ok, align 4
  %have = icmp ne i32 %ok, 0
  br i1 %have, label %copy, label %query
query:
  %r = call i32 @sched_getaffinity(i32 0, ${word} 128, ptr @pool_allowed)
  %good = icmp eq i32 %r, 0
  br i1 %good, label %noted, label %exit
noted:
  store i32 1, ptr @pool_allowed_ok, align 4
  br label %copy
copy:
  %i = phi i32 [ 0, %entry ], [ 0, %noted ], [ %i.next, %copy ]
  %any = phi i64 [ 0, %entry ], [ 0, %noted ], [ %any.next, %copy ]
  %cpu.word = lshr i32 %cpu, 6
  %cpu.bit = and i32 %cpu, 63
  %bit64 = zext i32 %cpu.bit to i64
  %one = shl i64 1, %bit64
  %clear = xor i64 %one, -1
  %mine = icmp eq i32 %i, %cpu.word
  %keep = select i1 %mine, i64 %clear, i64 -1
  %src = getelementptr [16 x i64], ptr @pool_allowed, i64 0, i32 %i
  %dst = getelementptr [16 x i64], ptr @pool_mask, i64 0, i32 %i
  %w = load i64, ptr %src, align 8
  %w.kept = and i64 %w, %keep
  store i64 %w.kept, ptr %dst, align 8
  %any.next = or i64 %any, %w.kept
  %i.next = add i32 %i, 1
  %more = icmp slt i32 %i.next, 16
  br i1 %more, label %copy, label %check
check:
  %empty = icmp eq i64 %any.next, 0
  %n = load i32, ptr @pool_workers, align 4
  br i1 %empty, label %exit, label %pin
pin:
  %k = phi i32 [ 0, %check ], [ %k.next, %pin.next ]
  %in = icmp slt i32 %k, %n
  br i1 %in, label %pin.one, label %exit
pin.one:
  %slot = getelementptr [256 x ${word}], ptr @pool_threads, i64 0, i32 %k
  %thread = load ${word}, ptr %slot
  %e = call i32 @pthread_setaffinity_np(${word} %thread, ${word} 128, ptr @pool_mask)
  br label %pin.next
pin.next:
  %k.next = add i32 %k, 1
  br label %pin
exit:
  ret void
}

define internal void @relax() alwaysinline {
  ${relax_call}
  ret void
}

define internal ptr @pool_worker(ptr %arg) {
entry:
  %tid = ptrtoint ptr %arg to i32
  %start.slot = getelementptr [257 x i32], ptr @pool_start_gen, i64 0, i32 %tid
  %seen0 = load i32, ptr %start.slot, align 4
  br label %wait
wait:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %next ]
  %last = phi i32 [ 0, %entry ], [ %last.next, %next ]
  %limit = load atomic i32, ptr @pool_spin monotonic, align 4
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i.next, %spin.relax ], [ %i.next, %spin.yield ]
  %g.spin = load atomic i32, ptr @pool_gen acquire, align 4
  %new.spin = icmp ne i32 %g.spin, %seen
  br i1 %new.spin, label %run, label %spin.check
spin.check:
  %more = icmp slt i32 %i, %limit
  br i1 %more, label %spin.more, label %sleep
spin.more:
  %i.next = add i32 %i, 1
  %polite = and i32 %i.next, 15
  %yield = icmp eq i32 %polite, 0
  br i1 %yield, label %spin.yield, label %spin.relax
spin.relax:
  call void @relax()
  br label %spin
spin.yield:
  %y.w = call i32 @sched_yield()
  br label %spin
sleep:
  %s.in = atomicrmw add ptr @pool_sleepers, i32 1 seq_cst
  br label %sleep.loop
sleep.loop:
  %g.sleep = load atomic i32, ptr @pool_gen seq_cst, align 4
  %new.sleep = icmp ne i32 %g.sleep, %seen
  br i1 %new.sleep, label %woke, label %sleep.wait
sleep.wait:
  %w = call ${word} (${word}, ...) @syscall(${word} ${futex}, ptr @pool_gen, i32 128, i32 %seen, ptr null, ptr null, i32 0)
  br label %sleep.loop
woke:
  %s.out = atomicrmw sub ptr @pool_sleepers, i32 1 seq_cst
  br label %run
run:
  %g = phi i32 [ %g.spin, %spin ], [ %g.sleep, %woke ]
  br label %enter
enter:
  %job = load atomic i64, ptr @pool_job seq_cst, align 8
  %job.hi = lshr i64 %job, 32
  %jid = trunc i64 %job.hi to i32
  %job.lo = trunc i64 %job to i32
  %seen.job = icmp eq i32 %jid, %last
  %closed = icmp slt i32 %job.lo, 0
  %skip.a = or i1 %seen.job, %closed
  br i1 %skip.a, label %next, label %enter.team
enter.team:
  %team = load i32, ptr @pool_team, align 4
  %mine = icmp slt i32 %tid, %team
  br i1 %mine, label %enter.cas, label %next
enter.cas:
  %job.in = add i64 %job, 1
  %cx = cmpxchg ptr @pool_job, i64 %job, i64 %job.in seq_cst seq_cst
  %in = extractvalue { i64, i1 } %cx, 1
  br i1 %in, label %work, label %enter
work:
  %fn = load ptr, ptr @pool_fn, align 8
  %a = load ptr, ptr @pool_arg, align 8
  call void %fn(ptr %a, i32 %tid, i32 %team)
  %f = atomicrmw add ptr @pool_finished, i32 1 seq_cst
  %mw = load atomic i32, ptr @pool_master_waiting seq_cst, align 4
  %asleep = icmp ne i32 %mw, 0
  br i1 %asleep, label %work.wake, label %next
work.wake:
  %wm = call ${word} (${word}, ...) @syscall(${word} ${futex}, ptr @pool_finished, i32 129, i32 1, ptr null, ptr null, i32 0)
  br label %next
next:
  %last.next = phi i32 [ %jid, %enter ], [ %jid, %enter.team ], [ %jid, %work ], [ %jid, %work.wake ]
  br label %wait
}

define void @pool_launch(ptr %fn, ptr %arg, i32 %team.in) {
entry:
  %small = icmp slt i32 %team.in, 2
  br i1 %small, label %serial, label %claim
claim:
  %cx = cmpxchg ptr @pool_busy, i32 0, i32 1 acquire monotonic
  %ok = extractvalue { i32, i1 } %cx, 1
  br i1 %ok, label %start, label %serial
serial:
  call void %fn(ptr %arg, i32 0, i32 1)
  ret void
start:
  %team.c = call i32 @llvm.smin.i32(i32 %team.in, i32 257)
  %want = sub i32 %team.c, 1
  %have = load i32, ptr @pool_workers, align 4
  %gen = load i32, ptr @pool_gen, align 4
  %need = icmp slt i32 %have, %want
  br i1 %need, label %create, label %ready
create:
  %k = phi i32 [ %have, %start ], [ %k.next, %created ]
  %tid = add i32 %k, 1
  %start.slot = getelementptr [257 x i32], ptr @pool_start_gen, i64 0, i32 %tid
  store i32 %gen, ptr %start.slot, align 4
  %parg = inttoptr i32 %tid to ptr
  %slot = getelementptr [256 x ${word}], ptr @pool_threads, i64 0, i32 %k
  %rc = call i32 @pthread_create(ptr %slot, ptr null, ptr @pool_worker, ptr %parg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %ready, label %created
created:
  %k.next = add i32 %k, 1
  store i32 %k.next, ptr @pool_workers, align 4
  store i32 -1, ptr @pool_home, align 4
  %again = icmp slt i32 %k.next, %want
  br i1 %again, label %create, label %ready
ready:
  %workers = load i32, ptr @pool_workers, align 4
  %team.max = add i32 %workers, 1
  %team = call i32 @llvm.smin.i32(i32 %team.c, i32 %team.max)
  %solo = icmp slt i32 %team, 2
  br i1 %solo, label %alone, label %go
alone:
  call void %fn(ptr %arg, i32 0, i32 1)
  br label %exit
go:
  %pin.on = load atomic i32, ptr @pool_pin monotonic, align 4
  %pinning = icmp ne i32 %pin.on, 0
  br i1 %pinning, label %where, label %publish
where:
  %cpu = call i32 @sched_getcpu()
  %home = load i32, ptr @pool_home, align 4
  %moved = icmp ne i32 %cpu, %home
  %valid = icmp ult i32 %cpu, 1024
  %repin = and i1 %moved, %valid
  br i1 %repin, label %keep.off, label %publish
keep.off:
  call void @pool_keep_off(i32 %cpu)
  store i32 %cpu, ptr @pool_home, align 4
  br label %publish
publish:
  store ptr %fn, ptr @pool_fn, align 8
  store ptr %arg, ptr @pool_arg, align 8
  store i32 %team, ptr @pool_team, align 4
  store atomic i32 0, ptr @pool_finished seq_cst, align 4
  %g.new = add i32 %gen, 1
  %g.new64 = zext i32 %g.new to i64
  %job.new = shl i64 %g.new64, 32
  store atomic i64 %job.new, ptr @pool_job seq_cst, align 8
  store atomic i32 %g.new, ptr @pool_gen seq_cst, align 4
  %sl = load atomic i32, ptr @pool_sleepers seq_cst, align 4
  %anyone = icmp sgt i32 %sl, 0
  br i1 %anyone, label %wake, label %own
wake:
  %wk = call ${word} (${word}, ...) @syscall(${word} ${futex}, ptr @pool_gen, i32 129, i32 2147483647, ptr null, ptr null, i32 0)
  br label %own
own:
  call void %fn(ptr %arg, i32 0, i32 %team)
  %job.old = atomicrmw or ptr @pool_job, i64 2147483648 seq_cst
  %job.old32 = trunc i64 %job.old to i32
  %entered = and i32 %job.old32, 2147483647
  br label %join
join:
  %j = phi i32 [ 0, %own ], [ %j.next, %join.pause ], [ %j.next, %join.yield ]
  %done = load atomic i32, ptr @pool_finished acquire, align 4
  %finished = icmp eq i32 %done, %entered
  br i1 %finished, label %exit, label %join.wait
join.wait:
  %j.next = add i32 %j, 1
  %join.limit = load atomic i32, ptr @pool_join_spin monotonic, align 4
  %patient = icmp slt i32 %j, %join.limit
  br i1 %patient, label %join.relax, label %join.sleep
join.relax:
  %jp = and i32 %j.next, 15
  %jy = icmp eq i32 %jp, 0
  br i1 %jy, label %join.yield, label %join.pause
join.pause:
  call void @relax()
  br label %join
join.yield:
  %y.m = call i32 @sched_yield()
  br label %join
join.sleep:
  store atomic i32 1, ptr @pool_master_waiting seq_cst, align 4
  br label %join.sleep.loop
join.sleep.loop:
  %done.s = load atomic i32, ptr @pool_finished seq_cst, align 4
  %finished.s = icmp eq i32 %done.s, %entered
  br i1 %finished.s, label %join.woke, label %join.sleep.wait
join.sleep.wait:
  %ws = call ${word} (${word}, ...) @syscall(${word} ${futex}, ptr @pool_finished, i32 128, i32 %done.s, ptr null, ptr null, i32 0)
  br label %join.sleep.loop
join.woke:
  store atomic i32 0, ptr @pool_master_waiting seq_cst, align 4
  br label %exit
exit:
  store atomic i32 0, ptr @pool_busy release, align 4
  ret void
}

; The block cache: up to 8 freed blocks, each slot taken and filled with atomic exchanges,
; so only the thread holding a block ever reads it. A block is 64 bytes of header (its
; capacity) followed by the caller's 64-byte aligned bytes.
@alloc_cache = internal global [8 x ptr] zeroinitializer, align 64
@alloc_victim = internal global i32 0, align 64

declare ptr @aligned_alloc(${word}, ${word})
declare void @free(ptr)

define ptr @ember_alloc(i64 %nbytes) {
entry:
  br label %scan
scan:
  %i = phi i32 [ 0, %entry ], [ %i.next, %next ]
  %more = icmp slt i32 %i, 8
  br i1 %more, label %take, label %fresh
take:
  %slot = getelementptr [8 x ptr], ptr @alloc_cache, i64 0, i32 %i
  %block = atomicrmw xchg ptr %slot, ptr null acq_rel
  %empty = icmp eq ptr %block, null
  br i1 %empty, label %next, label %fits
fits:
  %cap = load i64, ptr %block, align 8
  %enough = icmp uge i64 %cap, %nbytes
  br i1 %enough, label %reuse, label %back
reuse:
  %user = getelementptr i8, ptr %block, i64 64
  ret ptr %user
back:
  %cx = cmpxchg ptr %slot, ptr null, ptr %block acq_rel monotonic
  %put = extractvalue { ptr, i1 } %cx, 1
  br i1 %put, label %next, label %drop
drop:
  call void @free(ptr %block)
  br label %next
next:
  %i.next = add i32 %i, 1
  br label %scan
fresh:
  %up = add i64 %nbytes, 63
  %capacity = and i64 %up, -64
  %total = add i64 %capacity, 64
  %total.size = ${to_word} i64 %total to ${word}
  %new = call ptr @aligned_alloc(${word} 64, ${word} %total.size)
  %failed = icmp eq ptr %new, null
  br i1 %failed, label %none, label %fill
none:
  ret ptr null
fill:
  store i64 %capacity, ptr %new, align 8
  %user.new = getelementptr i8, ptr %new, i64 64
  ret ptr %user.new
}

define void @ember_free(ptr %user) {
entry:
  %null = icmp eq ptr %user, null
  br i1 %null, label %exit, label %keep
keep:
  %block = getelementptr i8, ptr %user, i64 -64
  br label %scan
scan:
  %i = phi i32 [ 0, %keep ], [ %i.next, %full ]
  %more = icmp slt i32 %i, 8
  br i1 %more, label %try, label %evict
try:
  %slot = getelementptr [8 x ptr], ptr @alloc_cache, i64 0, i32 %i
  %cx = cmpxchg ptr %slot, ptr null, ptr %block acq_rel monotonic
  %put = extractvalue { ptr, i1 } %cx, 1
  br i1 %put, label %exit, label %full
full:
  %i.next = add i32 %i, 1
  br label %scan
evict:
  %v = atomicrmw add ptr @alloc_victim, i32 1 monotonic
  %victim = and i32 %v, 7
  %vslot = getelementptr [8 x ptr], ptr @alloc_cache, i64 0, i32 %victim
  %old = atomicrmw xchg ptr %vslot, ptr %block acq_rel
  %had = icmp ne ptr %old, null
  br i1 %had, label %release, label %exit
release:
  call void @free(ptr %old)
  br label %exit
exit:
  ret void
}

define void @pool_reset_after_fork() {
  store i32 -1, ptr @pool_home, align 4
  store i32 0, ptr @pool_workers, align 4
  store i32 0, ptr @pool_sleepers, align 4
  store i32 0, ptr @pool_finished, align 4
  store i32 0, ptr @pool_busy, align 4
  store i32 0, ptr @pool_master_waiting, align 4
  ret void
}

declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

define internal void @gomp_body(ptr %data) {
  %fn = load ptr, ptr %data, align 8
  %argp = getelementptr ptr, ptr %data, i64 1
  %arg = load ptr, ptr %argp, align 8
  %tid = call i32 @omp_get_thread_num()
  %n = call i32 @omp_get_num_threads()
  call void %fn(ptr %arg, i32 %tid, i32 %n)
  ret void
}

define void @gomp_launch(ptr %fn, ptr %arg, i32 %team) {
  %data = alloca [2 x ptr], align 8
  store ptr %fn, ptr %data, align 8
  %p1 = getelementptr ptr, ptr %data, i64 1
  store ptr %arg, ptr %p1, align 8
  call void @GOMP_parallel(ptr @gomp_body, ptr %data, i32 %team, i32 0)
  ret void
}
