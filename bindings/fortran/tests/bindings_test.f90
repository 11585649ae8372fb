! bindings_test: calls every binding of `use tensorhub` and checks what comes back, within one
! process: a trainer context with the embedded registry and a rollout context connected to
! it (its address through an info object), publish then replicate, update, the nonblocking
! requests (a replicate is made to wait at the registry deterministically: the source has two
! shards and the second rollout shard joins only when the test says so), misuse that must
! fail with its code, Info round trips and string truncation. The module's constants are
! compared with the header's (constants_check.c). Prints each failed check; exits 1 if any.
program bindings_test
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int32, int64, error_unit, output_unit
  use tensorhub
  implicit none

  integer :: failures = 0
  type(THUB_Context) :: tctx, rctx

  call check_constants()
  call check_library_and_errors()
  call check_info()
  call check_contexts()
  call check_models_and_requests()
  call check_shutdown()

  if (failures > 0) then
    write(error_unit, '(a,i0,a)') "bindings_test: ", failures, " check(s) failed"
    error stop 1
  end if
  write(output_unit, '(a)') "bindings_test: every binding called and checked"

contains

  subroutine expect(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      failures = failures + 1
      write(error_unit, '(a,a)') "FAILED: ", what
    end if
  end subroutine

  ! A call's status is what the test expects; else say which, with the detail of ctx.
  subroutine expect_status(got, want, what, ctx)
    integer, intent(in) :: got, want
    character(len=*), intent(in) :: what
    type(THUB_Context), intent(in), optional :: ctx
    character(len=512) :: detail
    integer :: ierr
    if (got == want) return
    failures = failures + 1
    detail = ""
    if (present(ctx)) call THUB_Last_error(ctx, detail, ierr)
    write(error_unit, '(a,a,a,i0,a,a,a,i0,a,a)') "FAILED: ", what, ": status ", got, " (", &
      THUB_Error_string(got), "), expected ", want, " | ", trim(detail)
  end subroutine

  subroutine check_constants()
    interface
      integer(c_int) function thub_test_header_constants(out, n) bind(C, name="thub_test_header_constants")
        import :: c_int, c_int64_t
        integer(c_int64_t), intent(inout) :: out(*)
        integer(c_int), value :: n
      end function
    end interface
    integer(int64), parameter :: n_mine = 25
    integer(int64) :: mine(n_mine)
    integer(c_int64_t) :: header(n_mine)
    integer :: n, i
    mine = [ int(THUB_VERSION_MAJOR, int64), int(THUB_VERSION_MINOR, int64), &
      int(THUB_VERSION_PATCH, int64), int(THUB_SUCCESS, int64), int(THUB_IN_PROGRESS, int64), &
      int(THUB_NOT_UPDATED, int64), int(THUB_ERR_ARG, int64), int(THUB_ERR_STATE, int64), &
      int(THUB_ERR_NOT_FOUND, int64), int(THUB_ERR_LAYOUT, int64), int(THUB_ERR_TRANSPORT, int64), &
      int(THUB_ERR_REGISTRY, int64), int(THUB_ERR_TIMEOUT, int64), int(THUB_ERR_NO_MEMORY, int64), &
      int(THUB_ERR_UNSUPPORTED, int64), int(THUB_ERR_AUTH, int64), int(THUB_ERR_VERSION_LOST, int64), &
      int(THUB_ERR_CANCELED, int64), int(THUB_ERR_INTERNAL, int64), int(THUB_MEM_HOST, int64), &
      int(THUB_MEM_CUDA, int64), THUB_LATEST, THUB_LATEST_MINUS(0), THUB_LATEST_MINUS(1), &
      THUB_LATEST_MINUS(7_int64) ]
    header = -12345
    n = thub_test_header_constants(header, int(size(header), c_int))
    call expect(n == size(mine), "the module lists as many constants as constants_check.c")
    do i = 1, min(n, size(mine))
      if (header(i) /= mine(i)) then
        failures = failures + 1
        write(error_unit, '(a,i0,a,i0,a,i0)') "FAILED: constant ", i, " is ", mine(i), " in the module, ", &
          header(i), " in the header"
      end if
    end do
    call expect(THUB_LATEST_MINUS(0) == THUB_LATEST, "THUB_LATEST_MINUS(0) is THUB_LATEST")
    call expect(THUB_INFO_NULL == THUB_Info(c_null_ptr), "THUB_INFO_NULL wraps a null pointer")
    call expect(.not. c_associated(THUB_CONTEXT_NULL%ptr) .and. .not. c_associated(THUB_MODEL_NULL%ptr) .and. &
                .not. c_associated(THUB_REQUEST_NULL%ptr), "the null handles are null")
  end subroutine

  subroutine check_library_and_errors()
    integer :: major = -1, minor = -1, patch = -1, ierr
    character(len=256) :: version
    character(len=9) :: short
    call THUB_Get_version(major, minor, patch, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Get_version")
    call expect(major == THUB_VERSION_MAJOR .and. minor == THUB_VERSION_MINOR .and. patch == THUB_VERSION_PATCH, &
                "THUB_Get_version gives the header's version")
    version = "x"
    call THUB_Get_library_version(version, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Get_library_version")
    call expect(index(version, "TensorHub 0.1.0 (UCX ") == 1, "THUB_Get_library_version: '" // trim(version) // "'")
    call THUB_Get_library_version(short, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Get_library_version into 9 characters")
    call expect(short == "TensorHub", "a short version string is truncated: '" // short // "'")
    call expect(index(THUB_Error_string(THUB_ERR_CANCELED), "THUB_ERR_CANCELED: ") == 1, &
                "THUB_Error_string(THUB_ERR_CANCELED): " // THUB_Error_string(THUB_ERR_CANCELED))
    call expect(index(THUB_Error_string(THUB_SUCCESS), "THUB_SUCCESS") == 1, "THUB_Error_string(THUB_SUCCESS)")
    call expect(len(THUB_Error_string(12345)) > 0, "THUB_Error_string of an unknown code is not empty")
  end subroutine

  subroutine check_info()
    type(THUB_Info) :: info, copy
    character(len=64) :: value, key
    character(len=2) :: two
    logical :: flag
    integer :: ierr, n, vlen
    call expect(info == THUB_INFO_NULL, "a new type(THUB_Info) is THUB_INFO_NULL")
    call THUB_Info_create(info, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_create")
    call expect(info /= THUB_INFO_NULL, "THUB_Info_create gives a handle")
    call THUB_Info_set(info, "b", "2", ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_set b")
    call THUB_Info_set(info, "a   ", "one", ierr)   ! trailing blanks are not part of the key
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_set a")
    call THUB_Info_set(info, "", "x", ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Info_set with an empty key")
    n = -1
    call THUB_Info_get_nkeys(info, n, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_get_nkeys")
    call expect(n == 2, "two keys")
    call THUB_Info_get_nthkey(info, 0, key, ierr)
    call expect(ierr == THUB_SUCCESS .and. key == "a", "THUB_Info_get_nthkey 0 is 'a': '" // trim(key) // "'")
    call THUB_Info_get_nthkey(info, 1, key, ierr)
    call expect(ierr == THUB_SUCCESS .and. key == "b", "THUB_Info_get_nthkey 1 is 'b': '" // trim(key) // "'")
    call THUB_Info_get_nthkey(info, 2, key, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Info_get_nthkey out of range")
    value = ""
    call THUB_Info_get(info, "a", value, flag, ierr)
    call expect(ierr == THUB_SUCCESS .and. flag .and. value == "one", "THUB_Info_get a: '" // trim(value) // "'")
    value = "untouched"
    call THUB_Info_get(info, "zz", value, flag, ierr)
    call expect(ierr == THUB_SUCCESS .and. .not. flag .and. value == "untouched", "THUB_Info_get of a missing key")
    call THUB_Info_get(info, "a", two, flag, ierr)
    call expect(ierr == THUB_SUCCESS .and. flag .and. two == "on", "THUB_Info_get truncates: '" // two // "'")
    vlen = -1
    call THUB_Info_get_valuelen(info, "a", vlen, flag, ierr)
    call expect(ierr == THUB_SUCCESS .and. flag .and. vlen == 3, "THUB_Info_get_valuelen a is 3")
    call THUB_Info_get_valuelen(info, "zz", vlen, flag, ierr)
    call expect(ierr == THUB_SUCCESS .and. .not. flag, "THUB_Info_get_valuelen of a missing key")
    call THUB_Info_delete(info, "b", ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_delete b")
    call THUB_Info_delete(info, "b", ierr)
    call expect_status(ierr, THUB_ERR_NOT_FOUND, "THUB_Info_delete of a missing key")
    call THUB_Info_dup(info, copy, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_dup")
    call expect(copy /= info .and. copy /= THUB_INFO_NULL, "THUB_Info_dup gives another handle")
    call THUB_Info_free(info, ierr)
    call expect(ierr == THUB_SUCCESS .and. info == THUB_INFO_NULL, "THUB_Info_free sets THUB_INFO_NULL")
    call THUB_Info_free(info, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Info_free of THUB_INFO_NULL")
    call THUB_Info_set(info, "a", "1", ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Info_set on THUB_INFO_NULL")
    n = -1
    call THUB_Info_get_nkeys(copy, n, ierr)
    value = ""
    call THUB_Info_get(copy, "a", value, flag, ierr)
    call expect(n == 1 .and. flag .and. value == "one", "the copy outlives the original and holds a=one")
    call THUB_Info_free(copy, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Info_free of the copy")
  end subroutine

  subroutine check_contexts()
    type(THUB_Info) :: info
    type(THUB_Context) :: bad
    character(len=256) :: addr, detail
    character(len=3) :: tiny
    integer :: ierr
    ! an unknown key: THUB_Init fails, the handle stays null, the detail names the key
    call THUB_Info_create(info, ierr)
    call THUB_Info_set(info, "no_such_key", "1", ierr)
    call THUB_Init(info, bad, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Init with an unknown key")
    call expect(bad == THUB_CONTEXT_NULL, "a failed THUB_Init leaves the handle null")
    detail = ""
    call THUB_Last_error(THUB_CONTEXT_NULL, detail, ierr)
    call expect(ierr == THUB_SUCCESS .and. index(detail, "no_such_key") > 0, &
                "THUB_Last_error(THUB_CONTEXT_NULL) names the key: '" // trim(detail) // "'")
    call THUB_Info_free(info, ierr)

    call THUB_Info_create(info, ierr)
    call THUB_Info_set(info, "datacenter", "fortran", ierr)
    call THUB_Init(info, tctx, ierr)   ! no `registry`: the embedded one
    call expect_status(ierr, THUB_SUCCESS, "THUB_Init (trainer)")
    call THUB_Info_free(info, ierr)
    addr = ""
    call THUB_Registry_address(tctx, addr, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Registry_address", tctx)
    call expect(index(addr, ":") > 1 .and. len_trim(addr) < len(addr), "the address is host:port: '" // trim(addr) // "'")
    tiny = "abc"
    call THUB_Registry_address(tctx, tiny, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Registry_address into 3 characters")
    call expect(tiny == "abc", "a failed THUB_Registry_address writes nothing")
    detail = ""
    call THUB_Last_error(tctx, detail, ierr)
    call expect(ierr == THUB_SUCCESS .and. index(detail, "too small") > 0, "THUB_Last_error: '" // trim(detail) // "'")

    call THUB_Info_create(info, ierr)
    call THUB_Info_set(info, "registry", addr, ierr)
    call THUB_Info_set(info, "timeout_ms", "60000", ierr)
    call THUB_Init(info, rctx, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Init (rollout, registry=" // trim(addr) // ")")
    call THUB_Info_free(info, ierr)
    call expect(tctx /= rctx, "two contexts")
  end subroutine

  ! Element i of tensor t at version v, as the examples fill them.
  elemental integer(int32) function value_of(v, t, i)
    integer(int64), intent(in) :: v
    integer, intent(in) :: t, i
    value_of = int(mod(v * 1000003_int64 + int(t, int64) * 7919_int64 + int(i, int64) * 31_int64, 2147483647_int64), int32)
  end function

  subroutine fill(a, b, v)
    integer(int32), intent(inout) :: a(:), b(:)
    integer(int64), intent(in) :: v
    integer :: i
    a = [(value_of(v, 0, i), i = 1, size(a))]
    b = [(value_of(v, 1, i), i = 1, size(b))]
  end subroutine

  logical function holds(a, b, v)
    integer(int32), intent(in) :: a(:), b(:)
    integer(int64), intent(in) :: v
    integer :: i
    holds = all(a == [(value_of(v, 0, i), i = 1, size(a))]) .and. all(b == [(value_of(v, 1, i), i = 1, size(b))])
  end function

  integer(int64) function stat(m, key)
    type(THUB_Model), intent(in) :: m
    character(len=*), intent(in) :: key
    integer :: ierr
    stat = -2
    call THUB_Model_stat(m, key, stat, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Model_stat " // key)
  end function

  subroutine open_and_register(ctx, model, replica, shard, num_shards, m, a, b)
    type(THUB_Context), intent(in) :: ctx
    character(len=*), intent(in) :: model, replica
    integer, intent(in) :: shard, num_shards
    type(THUB_Model), intent(inout) :: m
    integer(int32), intent(in), target :: a(:), b(:)
    integer :: ierr
    call THUB_Open(ctx, model, replica, shard, num_shards, THUB_INFO_NULL, m, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Open " // model // " " // replica, ctx)
    call THUB_Register(m, "a", c_loc(a), int(size(a), c_size_t) * 4, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Register a of " // replica, ctx)
    call THUB_Register(m, "b", c_loc(b), int(size(b), c_size_t) * 4, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Register b of " // replica, ctx)
  end subroutine

  subroutine check_models_and_requests()
    integer, parameter :: na = 50000, nb = 1000
    type(THUB_Model) :: t, r, r2, bad
    type(THUB_Request) :: req, reqs(2), stale(1)
    type(THUB_Info) :: info
    type(c_ptr) :: base = c_null_ptr
    integer(int32), pointer :: ta(:)
    integer(int32), allocatable, target :: tb(:), ra(:), rb(:), r2a(:), r2b(:)
    integer(int64) :: got, gots(2)
    integer :: ierr, statuses(2), polls
    logical :: done

    ! the trainer's first tensor lives in THUB_Alloc_mem memory, the rest in allocatables
    call THUB_Alloc_mem(tctx, int(na, c_size_t) * 4, THUB_INFO_NULL, base, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Alloc_mem", tctx)
    if (ierr /= THUB_SUCCESS) error stop 1
    call c_f_pointer(base, ta, [na])
    allocate(tb(nb), ra(na), rb(nb), r2a(na), r2b(nb))
    ra = 0
    rb = 0
    r2a = 0
    r2b = 0

    call THUB_Open(tctx, "fpolicy", "trainer", 1, 1, THUB_INFO_NULL, bad, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Open with shard >= num_shards")
    call expect(bad == THUB_MODEL_NULL, "a failed THUB_Open leaves the handle null")
    call THUB_Info_create(info, ierr)
    call THUB_Info_set(info, "retain", "0", ierr)
    call THUB_Open(tctx, "fpolicy", "trainer", 0, 1, info, t, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Open trainer with info", tctx)
    call THUB_Info_free(info, ierr)
    call THUB_Register(t, "a", c_loc(ta), int(na, c_size_t) * 4, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Register a (THUB_Alloc_mem memory)", tctx)
    call THUB_Register(t, "b", c_loc(tb), int(nb, c_size_t) * 4, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Register b", tctx)
    call THUB_Register(t, "b", c_loc(tb), int(nb, c_size_t) * 4, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Register of a duplicate name")
    call THUB_Register(t, "c", c_loc(tb), int(nb, c_size_t) * 4, 7, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Register with an unknown memtype")
    call expect(stat(t, "total_bytes") == int(na + nb, int64) * 4, "total_bytes of the trainer")

    call fill(ta, tb, 1_int64)
    call THUB_Publish(t, 1_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish 1", tctx)
    call THUB_Publish(t, 1_int64, ierr)
    call expect_status(ierr, THUB_ERR_STATE, "THUB_Publish twice")
    call THUB_Register(t, "late", c_loc(tb), 4_c_size_t, THUB_MEM_HOST, ierr)
    call expect_status(ierr, THUB_ERR_STATE, "THUB_Register after THUB_Publish")
    call THUB_Free_mem(tctx, base, ierr)
    call expect_status(ierr, THUB_ERR_STATE, "THUB_Free_mem of memory a model registers")

    call open_and_register(rctx, "fpolicy", "rollout-1", 0, 1, r, ra, rb)
    call THUB_Publish(r, -5_int64, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Publish of a negative version")
    got = -7
    call THUB_Replicate(r, THUB_LATEST, got, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Replicate latest", rctx)
    call expect(got == 1, "THUB_Replicate got version 1")
    call expect(holds(ra, rb, 1_int64), "the rollout holds the trainer's version 1, byte for byte")
    call expect(stat(r, "held_version") == 1, "held_version is 1")
    got = -7
    call THUB_Model_stat(r, "no_such_stat", got, ierr)
    call expect(ierr == THUB_ERR_ARG .and. got == -7, "THUB_Model_stat of an unknown key fails and writes nothing")
    call THUB_Replicate(r, THUB_LATEST, got, ierr)
    call expect_status(ierr, THUB_ERR_STATE, "THUB_Replicate while holding a version")
    call THUB_Update(r, THUB_LATEST, got, ierr)
    call expect_status(ierr, THUB_NOT_UPDATED, "THUB_Update with nothing newer", rctx)
    call expect(got == 1, "THUB_NOT_UPDATED: still holding 1")

    ! train: version 2, blocking update
    call THUB_Unpublish(t, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Unpublish", tctx)
    call THUB_Unpublish(t, ierr)
    call expect_status(ierr, THUB_ERR_STATE, "THUB_Unpublish with nothing published")
    call fill(ta, tb, 2_int64)
    call THUB_Publish(t, 2_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish 2", tctx)
    call THUB_Update(r, THUB_LATEST, got, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Update to 2", rctx)
    call expect(got == 2 .and. holds(ra, rb, 2_int64), "the rollout holds version 2")

    ! version 3 through THUB_Iunpublish + THUB_Test and THUB_Iupdate + THUB_Wait
    call THUB_Iunpublish(t, req, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Iunpublish", tctx)
    call expect(req /= THUB_REQUEST_NULL, "THUB_Iunpublish gives a request")
    done = .false.
    polls = 0
    do while (.not. done)
      call THUB_Test(req, done, got, ierr)
      polls = polls + 1
      if (ierr /= THUB_SUCCESS) exit
    end do
    call expect_status(ierr, THUB_SUCCESS, "THUB_Test of the unpublish")
    call expect(done .and. req == THUB_REQUEST_NULL, "a finished THUB_Test frees the request")
    call fill(ta, tb, 3_int64)
    call THUB_Publish(t, 3_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish 3", tctx)
    call THUB_Iupdate(r, THUB_LATEST, req, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Iupdate", rctx)
    stale(1) = req
    got = -7
    call THUB_Wait(req, got, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Wait of the update", rctx)
    call expect(got == 3 .and. req == THUB_REQUEST_NULL .and. holds(ra, rb, 3_int64), "THUB_Wait: holding 3")
    call THUB_Wait(req, got, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Wait of THUB_REQUEST_NULL")
    ! a copy of a finished request's handle is no request any more
    call THUB_Test(stale(1), done, got, ierr)
    call expect(ierr == THUB_ERR_ARG .and. .not. done, "THUB_Test of a stale handle")
    gots = -7
    statuses = -7
    call THUB_Waitall(1, stale, gots, statuses, ierr)
    call expect(ierr == THUB_ERR_ARG .and. all(statuses == -7) .and. all(gots == -7), &
                "THUB_Waitall with a stale handle fails and writes nothing")

    ! version 4 to two rollouts at once: THUB_Waitall
    call open_and_register(rctx, "fpolicy", "rollout-2", 0, 1, r2, r2a, r2b)
    call THUB_Unpublish(t, ierr)
    call fill(ta, tb, 4_int64)
    call THUB_Publish(t, 4_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish 4", tctx)
    call THUB_Iupdate(r, THUB_LATEST, reqs(1), ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Iupdate (Waitall)", rctx)
    call THUB_Ireplicate(r2, THUB_LATEST_MINUS(0), reqs(2), ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Ireplicate (Waitall)", rctx)
    call THUB_Waitall(3, reqs, gots, statuses, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Waitall with count > size(requests)")
    gots = -7
    statuses = -7
    call THUB_Waitall(2, reqs, gots, statuses, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Waitall", rctx)
    call expect(all(gots == 4) .and. all(statuses == THUB_SUCCESS), "THUB_Waitall: both got version 4")
    call expect(all(reqs == THUB_REQUEST_NULL), "THUB_Waitall frees the requests")
    call expect(holds(ra, rb, 4_int64) .and. holds(r2a, r2b, 4_int64), "both rollouts hold version 4")

    call check_cancel_testany_free()

    ! close and free
    call THUB_Close(r, ierr)
    call expect(ierr == THUB_SUCCESS .and. r == THUB_MODEL_NULL, "THUB_Close sets THUB_MODEL_NULL")
    call THUB_Close(r, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Close of THUB_MODEL_NULL")
    call THUB_Close(r2, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Close rollout-2")
    call THUB_Close(t, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Close trainer")
    call THUB_Free_mem(tctx, base, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Free_mem", tctx)
    call THUB_Free_mem(tctx, base, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Free_mem twice")
  end subroutine

  ! A replicate that waits at the registry: model "fsharded" has two trainer shards holding
  ! v1; rollout shard 0 has taken part in its replica's transaction once and holds nothing
  ! now, so its next replicate waits for rollout shard 1, which joins when the test says.
  subroutine check_cancel_testany_free()
    integer, parameter :: n = 24576
    type(THUB_Model) :: t0, t1, s0, s1
    type(THUB_Request) :: req, reqs(1)
    integer(int32), allocatable, target :: a0(:), b0(:), a1(:), b1(:), x0(:), y0(:), x1(:), y1(:)
    integer(int64) :: got
    integer :: ierr, idx
    logical :: done
    allocate(a0(n), b0(16), a1(n), b1(16), x0(n), y0(16), x1(n), y1(16))
    call fill(a0, b0, 1_int64)
    call fill(a1, b1, 11_int64)
    x0 = 0
    y0 = 0
    x1 = 0
    y1 = 0
    call open_and_register(tctx, "fsharded", "trainer", 0, 2, t0, a0, b0)
    call open_and_register(tctx, "fsharded", "trainer", 1, 2, t1, a1, b1)
    call open_and_register(rctx, "fsharded", "rollout", 0, 2, s0, x0, y0)
    call open_and_register(rctx, "fsharded", "rollout", 1, 2, s1, x1, y1)
    call THUB_Publish(t0, 1_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish shard 0", tctx)
    call THUB_Publish(t1, 1_int64, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Publish shard 1", tctx)
    call THUB_Replicate(s0, 1_int64, got, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Replicate shard 0", rctx)
    call THUB_Unpublish(s0, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Unpublish shard 0", rctx)
    x0 = 0
    y0 = 0

    ! THUB_Cancel withdraws it
    call THUB_Ireplicate(s0, 1_int64, req, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Ireplicate (to cancel)", rctx)
    call THUB_Cancel(req, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Cancel")
    call expect(req /= THUB_REQUEST_NULL, "a canceled request is still to be completed")
    got = -7
    call THUB_Wait(req, got, ierr)
    call expect_status(ierr, THUB_ERR_CANCELED, "THUB_Wait of a canceled replicate")
    call expect(req == THUB_REQUEST_NULL .and. got == -7, "the canceled request is freed, got untouched")
    call expect(stat(s0, "held_version") == -1, "a canceled replicate holds nothing")
    call THUB_Cancel(req, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Cancel of THUB_REQUEST_NULL")

    ! THUB_Testany: not finished while it waits; finished (index 1) once shard 1 joins
    call THUB_Ireplicate(s0, 1_int64, reqs(1), ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Ireplicate (Testany)", rctx)
    idx = -5
    call THUB_Testany(1, reqs, idx, done, got, ierr)
    call expect(ierr == THUB_SUCCESS .and. .not. done .and. idx == 0, "THUB_Testany: none finished yet")
    call THUB_Replicate(s1, 1_int64, got, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Replicate shard 1 (unblocks shard 0)", rctx)
    call expect(got == 1 .and. all(x1 == a1) .and. all(y1 == b1), "rollout shard 1 holds trainer shard 1")
    done = .false.
    do while (.not. done)
      call THUB_Testany(1, reqs, idx, done, got, ierr)
      if (ierr /= THUB_SUCCESS) exit
    end do
    call expect_status(ierr, THUB_SUCCESS, "THUB_Testany", rctx)
    call expect(done .and. idx == 1 .and. got == 1 .and. reqs(1) == THUB_REQUEST_NULL, &
                "THUB_Testany: request 1 finished with version 1")
    call expect(all(x0 == a0) .and. all(y0 == b0), "rollout shard 0 holds trainer shard 0")
    call THUB_Testany(1, reqs, idx, done, got, ierr)
    call expect(ierr == THUB_SUCCESS .and. done .and. idx == 0, "THUB_Testany with no active request")

    ! THUB_Request_free: the operation goes on; THUB_Finalize waits for it
    call THUB_Iupdate(s0, THUB_LATEST, req, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Iupdate (to free)", rctx)
    call THUB_Request_free(req, ierr)
    call expect(ierr == THUB_SUCCESS .and. req == THUB_REQUEST_NULL, "THUB_Request_free sets THUB_REQUEST_NULL")
    call THUB_Request_free(req, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Request_free of THUB_REQUEST_NULL")
    ! s0, s1, t0 and t1 stay open: THUB_Finalize closes them
  end subroutine

  subroutine check_shutdown()
    integer :: ierr
    call THUB_Finalize(rctx, ierr)
    call expect(ierr == THUB_SUCCESS .and. rctx == THUB_CONTEXT_NULL, "THUB_Finalize (rollout) sets THUB_CONTEXT_NULL")
    call THUB_Finalize(tctx, ierr)
    call expect_status(ierr, THUB_SUCCESS, "THUB_Finalize (trainer)")
    call THUB_Finalize(tctx, ierr)
    call expect_status(ierr, THUB_ERR_ARG, "THUB_Finalize of THUB_CONTEXT_NULL")
  end subroutine
end program bindings_test
