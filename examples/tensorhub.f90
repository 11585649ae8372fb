! tensorhub: Fortran interfaces to the TensorHub C API through ISO_C_BINDING.
!
! Handles are type(c_ptr); strings passed to C must end in c_null_char (thub_cstr does it).
! Every function returns the C status (THUB_SUCCESS = 0, errors < 0). Covered: what a
! rollout needs (Init, Open, Register, Replicate, Update, Unpublish, Close, Finalize,
! Error_string, Last_error).
module tensorhub
  use, intrinsic :: iso_c_binding
  implicit none

  ! BEGIN GENERATED status-codes fortran (from src/common/status.h)
  integer(c_int), parameter :: THUB_SUCCESS = 0
  integer(c_int), parameter :: THUB_IN_PROGRESS = 1
  integer(c_int), parameter :: THUB_NOT_UPDATED = 2
  integer(c_int), parameter :: THUB_ERR_ARG = -1
  integer(c_int), parameter :: THUB_ERR_STATE = -2
  integer(c_int), parameter :: THUB_ERR_NOT_FOUND = -3
  integer(c_int), parameter :: THUB_ERR_LAYOUT = -4
  integer(c_int), parameter :: THUB_ERR_TRANSPORT = -5
  integer(c_int), parameter :: THUB_ERR_REGISTRY = -6
  integer(c_int), parameter :: THUB_ERR_TIMEOUT = -7
  integer(c_int), parameter :: THUB_ERR_NO_MEMORY = -8
  integer(c_int), parameter :: THUB_ERR_UNSUPPORTED = -9
  integer(c_int), parameter :: THUB_ERR_AUTH = -10
  integer(c_int), parameter :: THUB_ERR_VERSION_LOST = -11
  integer(c_int), parameter :: THUB_ERR_CANCELED = -12
  integer(c_int), parameter :: THUB_ERR_INTERNAL = -99
  ! END GENERATED
  integer(c_int), parameter :: THUB_MEM_HOST = 0, THUB_MEM_CUDA = 1
  integer(c_int64_t), parameter :: THUB_LATEST = -1_c_int64_t

  interface
    integer(c_int) function thub_init(info, ctx) bind(C, name="THUB_Init")
      import :: c_int, c_ptr
      type(c_ptr), value :: info          ! c_null_ptr for THUB_INFO_NULL
      type(c_ptr), intent(out) :: ctx
    end function

    integer(c_int) function thub_finalize(ctx) bind(C, name="THUB_Finalize")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: ctx
    end function

    integer(c_int) function thub_open(ctx, model, replica, shard, num_shards, info, m) &
        bind(C, name="THUB_Open")
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char), dimension(*), intent(in) :: model, replica
      integer(c_int), value :: shard, num_shards
      type(c_ptr), value :: info
      type(c_ptr), intent(out) :: m
    end function

    integer(c_int) function thub_register(m, tensor, addr, bytes, memtype) &
        bind(C, name="THUB_Register")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: m
      character(kind=c_char), dimension(*), intent(in) :: tensor
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      integer(c_int), value :: memtype
    end function

    integer(c_int) function thub_replicate(m, version, got) bind(C, name="THUB_Replicate")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: m
      integer(c_int64_t), value :: version
      integer(c_int64_t), intent(out) :: got
    end function

    integer(c_int) function thub_update(m, version, got) bind(C, name="THUB_Update")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: m
      integer(c_int64_t), value :: version
      integer(c_int64_t), intent(out) :: got
    end function

    integer(c_int) function thub_unpublish(m) bind(C, name="THUB_Unpublish")
      import :: c_int, c_ptr
      type(c_ptr), value :: m
    end function

    integer(c_int) function thub_close(m) bind(C, name="THUB_Close")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: m
    end function

    type(c_ptr) function thub_error_string_c(status) bind(C, name="THUB_Error_string")
      import :: c_ptr, c_int
      integer(c_int), value :: status
    end function

    integer(c_int) function thub_last_error_c(ctx, buf, len) bind(C, name="THUB_Last_error")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: ctx
      character(kind=c_char), dimension(*), intent(out) :: buf
      integer(c_size_t), value :: len
    end function

    integer(c_size_t) function thub_c_strlen(s) bind(C, name="strlen")
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

contains

  ! A Fortran string as a NUL-terminated C string.
  function thub_cstr(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function

  ! THUB_Error_string as a Fortran string.
  function thub_error_string(status) result(s)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: s
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = thub_error_string_c(status)
    n = int(thub_c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function

  ! THUB_Last_error of a context as a Fortran string.
  function thub_last_error(ctx) result(s)
    type(c_ptr), intent(in) :: ctx
    character(len=:), allocatable :: s
    character(kind=c_char) :: buf(1024)
    integer :: i, n
    buf = c_null_char
    if (thub_last_error_c(ctx, buf, int(size(buf), c_size_t)) /= THUB_SUCCESS) buf(1) = c_null_char
    n = 0
    do while (n < size(buf))
      if (buf(n + 1) == c_null_char) exit
      n = n + 1
    end do
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = buf(i)
    end do
  end function
end module tensorhub
