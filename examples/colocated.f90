! colocated: the co-located loop in Fortran with `use tensorhub`: the trainer and the rollout
! engine share one process (as a hybrid engine shares a GPU), each with its own weights.
! Every step: train -> publish -> generate (the engine takes the new version with one
! THUB_Update, or THUB_Replicate the first time, and reads every weight) -> unpublish, after
! which the trainer may overwrite its weights again.
!
!   colocated_f90 [STEPS [MIB]]
!
! One context with the embedded registry (no TENSORHUB_REGISTRY needed); standalone
! rollouts elsewhere would find it at the address it prints. The model is that of
! trainer_rollout.c; element i of tensor t at version v is (v*1000003 + t*7919 + i*31) mod
! 2147483647. Prints "step V: generated with version V" per step; the test
! ExampleFortranColocated runs 3 steps of 8 MiB.
!
! The integration adds 35 lines of TensorHub code: 25 lines name THUB_, ierror or `use
! tensorhub` (`grep -v '^ *!' colocated.f90 | grep -ciE 'THUB_|use tensorhub|ierror'`: the
! declarations, Init, Registry_address, two Opens, three Registers (register_all, called for
! both models), Publish, Replicate / Update, Unpublish, two Closes, Finalize) and 10 more are
! the error check ok() and register_all's frame.
program colocated
  use, intrinsic :: iso_c_binding, only: c_loc, c_size_t
  use, intrinsic :: iso_fortran_env, only: int32, int64, output_unit, error_unit
  use tensorhub
  implicit none

  integer, parameter :: ntensors = 3
  character(len=*), parameter :: names(ntensors) = [character(len=12) :: "embed.weight", "head.weight", "head.bias"]
  type :: weights
    integer(int32), allocatable :: embed(:), head(:), bias(:)
  end type
  type(weights), target :: trainer_w, engine_w
  type(THUB_Context) :: ctx
  type(THUB_Model) :: trainer, engine
  character(len=256) :: addr
  integer(int64) :: steps = 3, v, got = -1
  integer :: mib = 8, ierror
  character(len=32) :: arg

  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) steps
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) mib
  end if
  call make(trainer_w, mib)
  call make(engine_w, mib)

  call THUB_Init(THUB_INFO_NULL, ctx, ierror); call ok("THUB_Init")   ! the embedded registry
  call THUB_Registry_address(ctx, addr, ierror); call ok("THUB_Registry_address")
  write(output_unit, '(a,a,a,i0,a)') "colocated: registry ", trim(addr), ", model ", mib, " MiB"
  call THUB_Open(ctx, "policy", "trainer", 0, 1, THUB_INFO_NULL, trainer, ierror); call ok("THUB_Open trainer")
  call register_all(trainer, trainer_w)
  call THUB_Open(ctx, "policy", "colocated-engine", 0, 1, THUB_INFO_NULL, engine, ierror); call ok("THUB_Open engine")
  call register_all(engine, engine_w)

  do v = 1, steps
    call train_step(trainer_w, v)
    call THUB_Publish(trainer, v, ierror); call ok("THUB_Publish")
    if (v == 1) then
      call THUB_Replicate(engine, THUB_LATEST, got, ierror); call ok("THUB_Replicate")
    else
      call THUB_Update(engine, THUB_LATEST, got, ierror); call ok("THUB_Update")
    end if
    call generate(engine_w, got)
    write(output_unit, '(a,i0,a,i0)') "step ", v, ": generated with version ", got
    if (got /= v) error stop "colocated: the engine did not get the version just published"
    ! withdraw it (returns once nobody reads the trainer's weights); then train on
    call THUB_Unpublish(trainer, ierror); call ok("THUB_Unpublish")
  end do
  call THUB_Close(engine, ierror); call ok("THUB_Close engine")
  call THUB_Close(trainer, ierror); call ok("THUB_Close trainer")
  call THUB_Finalize(ctx, ierror); call ok("THUB_Finalize")
  write(output_unit, '(a,i0,a)') "colocated: done, ", steps, " steps, every weight checked"

contains

  ! Stops with the code's text and the context's detail when the last call failed.
  subroutine ok(what)
    character(len=*), intent(in) :: what
    character(len=1024) :: detail
    integer :: ierr
    if (ierror >= 0) return
    detail = ""
    call THUB_Last_error(ctx, detail, ierr)
    write(error_unit, '(6a)') "colocated_f90: ", what, ": ", THUB_Error_string(ierror), " | ", trim(detail)
    error stop 1
  end subroutine

  subroutine register_all(m, w)
    type(THUB_Model), intent(in) :: m
    type(weights), intent(in), target :: w
    call THUB_Register(m, names(1), c_loc(w%embed), 4 * size(w%embed, kind=c_size_t), THUB_MEM_HOST, ierror)
    call ok("THUB_Register " // names(1))
    call THUB_Register(m, names(2), c_loc(w%head), 4 * size(w%head, kind=c_size_t), THUB_MEM_HOST, ierror)
    call ok("THUB_Register " // names(2))
    call THUB_Register(m, names(3), c_loc(w%bias), 4 * size(w%bias, kind=c_size_t), THUB_MEM_HOST, ierror)
    call ok("THUB_Register " // names(3))
  end subroutine

  subroutine make(w, mib)
    type(weights), intent(inout) :: w
    integer, intent(in) :: mib
    integer :: half
    half = mib * 262144 / 2
    allocate(w%embed(half), w%head(half - 16), w%bias(16))
    w%embed = 0
    w%head = 0
    w%bias = 0
  end subroutine

  elemental integer(int32) function value_of(version, t, i)
    integer(int64), intent(in) :: version
    integer, intent(in) :: t, i
    value_of = int(mod(version * 1000003_int64 + int(t, int64) * 7919_int64 + int(i, int64) * 31_int64, &
                       2147483647_int64), int32)
  end function

  ! Stands in for an optimizer step: writes every weight of version v.
  subroutine train_step(w, version)
    type(weights), intent(inout) :: w
    integer(int64), intent(in) :: version
    integer :: i
    w%embed = [(value_of(version, 0, i), i = 0, size(w%embed) - 1)]
    w%head = [(value_of(version, 1, i), i = 0, size(w%head) - 1)]
    w%bias = [(value_of(version, 2, i), i = 0, size(w%bias) - 1)]
  end subroutine

  ! Stands in for a generation batch: reads every weight and checks it.
  subroutine generate(w, version)
    type(weights), intent(in) :: w
    integer(int64), intent(in) :: version
    integer :: i
    if (any(w%embed /= [(value_of(version, 0, i), i = 0, size(w%embed) - 1)]) .or. &
        any(w%head /= [(value_of(version, 1, i), i = 0, size(w%head) - 1)]) .or. &
        any(w%bias /= [(value_of(version, 2, i), i = 0, size(w%bias) - 1)])) then
      write(error_unit, '(a,i0,a)') "colocated_f90: the engine's weights are not version ", version
      error stop 1
    end if
  end subroutine
end program colocated
