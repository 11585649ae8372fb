! consumer: a program outside the project, built with gfortran alone against the installed
! module (installed_consumer.sh). One context with the embedded registry; a trainer publishes
! two versions of a 1 MiB tensor, a rollout in the same process replicates and updates, and
! the program checks every element.
program consumer
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real32, error_unit
  use tensorhub
  implicit none
  integer, parameter :: n = 262144
  real(real32), allocatable, target :: w(:), r(:)
  type(THUB_Context) :: ctx
  type(THUB_Model) :: trainer, rollout
  character(len=128) :: addr
  integer(int64) :: got
  integer :: ierror

  allocate(w(n), r(n))
  r = 0
  call THUB_Init(THUB_INFO_NULL, ctx, ierror)
  call ok("THUB_Init")
  call THUB_Registry_address(ctx, addr, ierror)
  call ok("THUB_Registry_address")
  call THUB_Open(ctx, "policy", "trainer", 0, 1, THUB_INFO_NULL, trainer, ierror)
  call ok("THUB_Open trainer")
  call THUB_Register(trainer, "w", c_loc(w), int(n, c_size_t) * 4, THUB_MEM_HOST, ierror)
  call ok("THUB_Register trainer")
  call THUB_Open(ctx, "policy", "rollout-0", 0, 1, THUB_INFO_NULL, rollout, ierror)
  call ok("THUB_Open rollout")
  call THUB_Register(rollout, "w", c_loc(r), int(n, c_size_t) * 4, THUB_MEM_HOST, ierror)
  call ok("THUB_Register rollout")

  w = 1.5
  call THUB_Publish(trainer, 1_int64, ierror)
  call ok("THUB_Publish 1")
  call THUB_Replicate(rollout, THUB_LATEST, got, ierror)
  call ok("THUB_Replicate")
  if (got /= 1 .or. any(abs(r - 1.5) > 0)) error stop "consumer: version 1 is wrong"
  call THUB_Unpublish(trainer, ierror)
  call ok("THUB_Unpublish")
  w = -2.25
  call THUB_Publish(trainer, 2_int64, ierror)
  call ok("THUB_Publish 2")
  call THUB_Update(rollout, THUB_LATEST, got, ierror)
  call ok("THUB_Update")
  if (ierror /= THUB_SUCCESS .or. got /= 2 .or. any(abs(r + 2.25) > 0)) error stop "consumer: version 2 is wrong"
  call THUB_Close(rollout, ierror)
  call ok("THUB_Close rollout")
  call THUB_Close(trainer, ierror)
  call ok("THUB_Close trainer")
  call THUB_Finalize(ctx, ierror)
  call ok("THUB_Finalize")
  print '(a,a,a)', "consumer: registry ", trim(addr), ": replicated and updated 1 MiB, every element checked"

contains

  subroutine ok(what)
    character(len=*), intent(in) :: what
    character(len=512) :: detail
    integer :: ierr
    if (ierror >= 0) return
    detail = ""
    call THUB_Last_error(ctx, detail, ierr)
    write(error_unit, '(a,a,a,a,a,a)') "consumer: ", what, ": ", THUB_Error_string(ierror), " | ", trim(detail)
    error stop 1
  end subroutine
end program consumer
