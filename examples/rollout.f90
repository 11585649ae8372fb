! rollout: a TensorHub rollout worker in Fortran (the C example's rollout mode).
!
!   TENSORHUB_REGISTRY=host:port rollout_f90 [STEPS [MIB]]
!
! Registers the model of trainer_rollout.c (int32 tensors embed.weight, head.weight,
! head.bias), replicates the latest version, then alternates a "generation batch" (which
! reads and checks every weight) with THUB_Update(latest) until it holds version STEPS.
! Prints "holding V" for every version it gets; run by `trainer_rollout trainer S M ./rollout_f90`.
program rollout
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
  use tensorhub
  implicit none

  integer(c_int32_t), allocatable, target :: embed(:), head(:), bias(:)
  type(c_ptr) :: ctx = c_null_ptr, m = c_null_ptr
  integer(c_int64_t) :: steps = 3, v = -1
  integer :: mib = 8, half
  integer(c_int) :: st
  character(len=32) :: arg, replica

  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) steps
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) mib
  end if
  half = mib * 262144 / 2
  allocate(embed(half), head(half - 16), bias(16))
  embed = 0
  head = 0
  bias = 0

  ! no info: the registry address comes from TENSORHUB_REGISTRY
  call ok(thub_init(c_null_ptr, ctx), "THUB_Init")
  write(replica, '(a,i0)') "rollout-f90-", getpid_f()
  call ok(thub_open(ctx, thub_cstr("policy"), thub_cstr(replica), 0_c_int, 1_c_int, c_null_ptr, m), "THUB_Open")
  call ok(thub_register(m, thub_cstr("embed.weight"), c_loc(embed), int(size(embed), c_size_t) * 4, THUB_MEM_HOST), &
          "THUB_Register embed.weight")
  call ok(thub_register(m, thub_cstr("head.weight"), c_loc(head), int(size(head), c_size_t) * 4, THUB_MEM_HOST), &
          "THUB_Register head.weight")
  call ok(thub_register(m, thub_cstr("head.bias"), c_loc(bias), int(size(bias), c_size_t) * 4, THUB_MEM_HOST), &
          "THUB_Register head.bias")

  call ok(thub_replicate(m, THUB_LATEST, v), "THUB_Replicate")
  call say_holding(v)
  do while (v < steps)
    call generate(v)
    st = thub_update(m, THUB_LATEST, v)
    if (st < 0) call ok(st, "THUB_Update")
    if (st == THUB_SUCCESS) call say_holding(v)   ! THUB_NOT_UPDATED: keep what we hold
  end do
  call generate(v)
  call ok(thub_close(m), "THUB_Close")
  call ok(thub_finalize(ctx), "THUB_Finalize")
  write(error_unit, '(a,i0,a)') "rollout_f90: done, held versions 1..", steps, " and checked every element"

contains

  subroutine ok(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status < 0) then
      write(error_unit, '(a,a,a,a,a,a)') "rollout_f90: ", what, ": ", thub_error_string(status), " | ", &
                                         thub_last_error(ctx)
      error stop 1
    end if
  end subroutine

  subroutine say_holding(version)
    integer(c_int64_t), intent(in) :: version
    write(output_unit, '(a,i0)') "holding ", version
    flush(output_unit)
  end subroutine

  ! Element i (0-based) of tensor t at version v, as in trainer_rollout.c.
  pure integer(c_int32_t) function expected(version, t, i)
    integer(c_int64_t), intent(in) :: version
    integer, intent(in) :: t, i
    expected = int(mod(version * 1000003_c_int64_t + int(t, c_int64_t) * 7919_c_int64_t + &
                       int(i, c_int64_t) * 31_c_int64_t, 2147483647_c_int64_t), c_int32_t)
  end function

  ! Stands in for a generation batch: reads every weight and checks it.
  subroutine generate(version)
    integer(c_int64_t), intent(in) :: version
    call check_tensor(embed, version, 0, "embed.weight")
    call check_tensor(head, version, 1, "head.weight")
    call check_tensor(bias, version, 2, "head.bias")
  end subroutine

  subroutine check_tensor(w, version, t, name)
    integer(c_int32_t), intent(in) :: w(:)
    integer(c_int64_t), intent(in) :: version
    integer, intent(in) :: t
    character(len=*), intent(in) :: name
    integer :: i
    do i = 1, size(w)
      if (w(i) /= expected(version, t, i - 1)) then
        write(error_unit, '(a,i0,a,a,a,i0,a)') "rollout_f90: version ", version, ": ", name, "(", i, ") is wrong"
        error stop 1
      end if
    end do
  end subroutine

  integer function getpid_f()
    interface
      integer(c_int) function c_getpid() bind(C, name="getpid")
        import :: c_int
      end function
    end interface
    getpid_f = int(c_getpid())
  end function
end program rollout
