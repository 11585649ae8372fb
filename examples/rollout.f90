! rollout: the standalone rollout loop in Fortran with `use tensorhub` (the C example's rollout
! mode): replicate the latest version, then generate and update to the latest in a loop.
!
!   TENSORHUB_REGISTRY=host:port rollout_f90 [STEPS [MIB]]
!
! Registers the model of trainer_rollout.c (int32 tensors embed.weight, head.weight,
! head.bias), replicates the latest version, then alternates a "generation batch" (which
! reads and checks every weight) with THUB_Update(latest) until it holds version STEPS.
! Prints "holding V" for every version it gets; run by `trainer_rollout trainer S M ./rollout_f90`
! (the test ExampleFortranRollout).
!
! The integration adds 27 lines of TensorHub code: 20 lines name THUB_, ierror or `use
! tensorhub` (`grep -v '^ *!' rollout.f90 | grep -ciE 'THUB_|use tensorhub|ierror'`: the
! declarations, Init, Open, three Registers, Replicate, Update with its THUB_NOT_UPDATED case,
! Close, Finalize) and 7 more are the error check ok().
program rollout
  use, intrinsic :: iso_c_binding, only: c_loc, c_size_t, c_int
  use, intrinsic :: iso_fortran_env, only: int32, int64, output_unit, error_unit
  use tensorhub
  implicit none

  integer(int32), allocatable, target :: embed(:), head(:), bias(:)
  type(THUB_Context) :: ctx
  type(THUB_Model) :: m
  integer(int64) :: steps = 3, v = -1
  integer :: mib = 8, half, ierror
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
  write(replica, '(a,i0)') "rollout-f90-", getpid_f()

  ! no info: the registry address comes from TENSORHUB_REGISTRY
  call THUB_Init(THUB_INFO_NULL, ctx, ierror); call ok("THUB_Init")
  call THUB_Open(ctx, "policy", replica, 0, 1, THUB_INFO_NULL, m, ierror); call ok("THUB_Open")
  call THUB_Register(m, "embed.weight", c_loc(embed), 4 * size(embed, kind=c_size_t), THUB_MEM_HOST, ierror)
  call ok("THUB_Register embed.weight")
  call THUB_Register(m, "head.weight", c_loc(head), 4 * size(head, kind=c_size_t), THUB_MEM_HOST, ierror)
  call ok("THUB_Register head.weight")
  call THUB_Register(m, "head.bias", c_loc(bias), 4 * size(bias, kind=c_size_t), THUB_MEM_HOST, ierror)
  call ok("THUB_Register head.bias")

  call THUB_Replicate(m, THUB_LATEST, v, ierror); call ok("THUB_Replicate")
  call say_holding(v)
  do while (v < steps)
    call generate(v)
    call THUB_Update(m, THUB_LATEST, v, ierror); call ok("THUB_Update")
    if (ierror == THUB_SUCCESS) call say_holding(v)   ! THUB_NOT_UPDATED: keep what we hold
  end do
  call generate(v)
  call THUB_Close(m, ierror); call ok("THUB_Close")
  call THUB_Finalize(ctx, ierror); call ok("THUB_Finalize")
  write(error_unit, '(a,i0,a)') "rollout_f90: done, held versions 1..", steps, " and checked every element"

contains

  ! Stops with the code's text and the context's detail when the last call failed.
  subroutine ok(what)
    character(len=*), intent(in) :: what
    character(len=1024) :: detail
    integer :: ierr
    if (ierror >= 0) return
    detail = ""
    call THUB_Last_error(ctx, detail, ierr)
    write(error_unit, '(6a)') "rollout_f90: ", what, ": ", THUB_Error_string(ierror), " | ", trim(detail)
    error stop 1
  end subroutine

  subroutine say_holding(version)
    integer(int64), intent(in) :: version
    write(output_unit, '(a,i0)') "holding ", version
    flush(output_unit)
  end subroutine

  ! Element i (0-based) of tensor t at version v, as in trainer_rollout.c.
  pure integer(int32) function expected(version, t, i)
    integer(int64), intent(in) :: version
    integer, intent(in) :: t, i
    expected = int(mod(version * 1000003_int64 + int(t, int64) * 7919_int64 + int(i, int64) * 31_int64, &
                       2147483647_int64), int32)
  end function

  ! Stands in for a generation batch: reads every weight and checks it.
  subroutine generate(version)
    integer(int64), intent(in) :: version
    call check_tensor(embed, version, 0, "embed.weight")
    call check_tensor(head, version, 1, "head.weight")
    call check_tensor(bias, version, 2, "head.bias")
  end subroutine

  subroutine check_tensor(w, version, t, name)
    integer(int32), intent(in) :: w(:)
    integer(int64), intent(in) :: version
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
