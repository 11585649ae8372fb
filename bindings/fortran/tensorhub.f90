! use tensorhub: the Fortran binding of the TensorHub C API (include/tensorhub/tensorhub.h),
! through ISO_C_BINDING, in the manner of MPI's: one subroutine per C function, named as it,
! with the C arguments in the C order and a trailing `integer, intent(out) :: ierror` that
! receives the C status (THUB_SUCCESS, THUB_NOT_UPDATED, THUB_IN_PROGRESS or a THUB_ERR_*).
! THUB_Error_string and THUB_LATEST_MINUS are functions.
!
! Conventions (docs/api.md has the C semantics; they are the same here):
!  - handles are type(THUB_Context), type(THUB_Model), type(THUB_Info), type(THUB_Request),
!    each wrapping the C handle; a new variable is THUB_*_NULL; == and /= compare them;
!  - input strings are character(len=*); trailing blanks are dropped (Fortran pads with them);
!  - output strings are character(len=*): the text is blank-padded, and a text longer than
!    the variable is truncated to it as the C call truncates to its buffer; only
!    THUB_Registry_address fails (THUB_ERR_ARG) when the address does not fit, as in C;
!  - output arguments are written only on success, as in C (so they are intent(inout));
!    the logical flags (flag, done) are always defined;
!  - versions are integer(int64); a tensor is type(c_ptr) (c_loc of a target) plus its size
!    in bytes as integer(c_size_t);
!  - Info_get_nthkey's n is 0-based as in C (and MPI); THUB_Testany's index is 1-based, 0
!    when none finished (MPI's Fortran does the same conversion).
module tensorhub
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_int, c_int64_t, c_size_t, c_char, c_null_char, &
                                         c_associated, c_f_pointer
  use, intrinsic :: iso_fortran_env, only: int32, int64
  implicit none
  ! Only THUB_* names are public: a program uses iso_c_binding itself (c_loc, c_size_t).
  private :: c_ptr, c_null_ptr, c_int, c_int64_t, c_size_t, c_char, c_null_char, c_associated, c_f_pointer, &
             int32, int64

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
  ! The header's other constants; tests/constants_check.c compares them with the header.
  integer, parameter :: THUB_VERSION_MAJOR = 0, THUB_VERSION_MINOR = 1, THUB_VERSION_PATCH = 0
  integer, parameter :: THUB_MEM_HOST = 0, THUB_MEM_CUDA = 1
  integer(int64), parameter :: THUB_LATEST = -1_int64

  type, bind(C) :: THUB_Context
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C) :: THUB_Model
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C) :: THUB_Info
    type(c_ptr) :: ptr = c_null_ptr
  end type
  type, bind(C) :: THUB_Request
    type(c_ptr) :: ptr = c_null_ptr
  end type

  type(THUB_Context), parameter :: THUB_CONTEXT_NULL = THUB_Context(c_null_ptr)
  type(THUB_Model), parameter :: THUB_MODEL_NULL = THUB_Model(c_null_ptr)
  type(THUB_Info), parameter :: THUB_INFO_NULL = THUB_Info(c_null_ptr)
  type(THUB_Request), parameter :: THUB_REQUEST_NULL = THUB_Request(c_null_ptr)

  interface operator(==)
    module procedure context_eq, model_eq, info_eq, request_eq
  end interface
  interface operator(/=)
    module procedure context_ne, model_ne, info_ne, request_ne
  end interface

  !> THUB_LATEST_MINUS(k): the k-th version before the newest (k = 0 is THUB_LATEST).
  interface THUB_LATEST_MINUS
    module procedure latest_minus_32, latest_minus_64
  end interface

  private :: context_eq, model_eq, info_eq, request_eq, context_ne, model_ne, info_ne, request_ne, &
             latest_minus_32, latest_minus_64, cstr, copy_out

contains

  ! ---- helpers ------------------------------------------------------------------------

  ! A Fortran string, less its trailing blanks, as a NUL-terminated C string.
  pure function cstr(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function

  ! The NUL-terminated text in buf into s, blank-padded (buf holds at most len(s) + 1 chars).
  pure subroutine copy_out(buf, s)
    character(kind=c_char), intent(in) :: buf(:)
    character(len=*), intent(inout) :: s
    integer :: i
    s = ' '
    do i = 1, min(len(s), size(buf))
      if (buf(i) == c_null_char) exit
      s(i:i) = buf(i)
    end do
  end subroutine

  elemental logical function context_eq(a, b)
    type(THUB_Context), intent(in) :: a, b
    context_eq = c_associated(a%ptr, b%ptr) .or. (.not. c_associated(a%ptr) .and. .not. c_associated(b%ptr))
  end function
  elemental logical function model_eq(a, b)
    type(THUB_Model), intent(in) :: a, b
    model_eq = c_associated(a%ptr, b%ptr) .or. (.not. c_associated(a%ptr) .and. .not. c_associated(b%ptr))
  end function
  elemental logical function info_eq(a, b)
    type(THUB_Info), intent(in) :: a, b
    info_eq = c_associated(a%ptr, b%ptr) .or. (.not. c_associated(a%ptr) .and. .not. c_associated(b%ptr))
  end function
  elemental logical function request_eq(a, b)
    type(THUB_Request), intent(in) :: a, b
    request_eq = c_associated(a%ptr, b%ptr) .or. (.not. c_associated(a%ptr) .and. .not. c_associated(b%ptr))
  end function
  elemental logical function context_ne(a, b)
    type(THUB_Context), intent(in) :: a, b
    context_ne = .not. context_eq(a, b)
  end function
  elemental logical function model_ne(a, b)
    type(THUB_Model), intent(in) :: a, b
    model_ne = .not. model_eq(a, b)
  end function
  elemental logical function info_ne(a, b)
    type(THUB_Info), intent(in) :: a, b
    info_ne = .not. info_eq(a, b)
  end function
  elemental logical function request_ne(a, b)
    type(THUB_Request), intent(in) :: a, b
    request_ne = .not. request_eq(a, b)
  end function

  elemental integer(int64) function latest_minus_32(k)
    integer(int32), intent(in) :: k
    latest_minus_32 = -1_int64 - int(k, int64)
  end function
  elemental integer(int64) function latest_minus_64(k)
    integer(int64), intent(in) :: k
    latest_minus_64 = -1_int64 - k
  end function

  ! ---- errors ---------------------------------------------------------------------------

  !> The text of a status code, with a hint (never fails; unknown codes give a generic text).
  function THUB_Error_string(status) result(text)
    interface
      type(c_ptr) function c_error_string(status) bind(C, name="THUB_Error_string")
        import :: c_ptr, c_int
        integer(c_int), value :: status
      end function
      integer(c_size_t) function c_strlen(s) bind(C, name="strlen")
        import :: c_size_t, c_ptr
        type(c_ptr), value :: s
      end function
    end interface
    integer, intent(in) :: status
    character(len=:), allocatable :: text
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = c_error_string(int(status, c_int))
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function

  !> The detail of the last failure on ctx (THUB_CONTEXT_NULL: of this thread's last THUB_Init).
  subroutine THUB_Last_error(ctx, string, ierror)
    interface
      integer(c_int) function c_last_error(ctx, buf, len) bind(C, name="THUB_Last_error")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: ctx
        character(kind=c_char), intent(inout) :: buf(*)
        integer(c_size_t), value :: len
      end function
    end interface
    type(THUB_Context), intent(in) :: ctx
    character(len=*), intent(inout) :: string
    integer, intent(out) :: ierror
    character(kind=c_char) :: buf(len(string) + 1)
    ierror = c_last_error(ctx%ptr, buf, int(size(buf), c_size_t))
    if (ierror == THUB_SUCCESS) call copy_out(buf, string)
  end subroutine

  ! ---- info -----------------------------------------------------------------------------

  subroutine THUB_Info_create(info, ierror)
    interface
      integer(c_int) function c_info_create(info) bind(C, name="THUB_Info_create")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: info
      end function
    end interface
    type(THUB_Info), intent(inout) :: info
    integer, intent(out) :: ierror
    ierror = c_info_create(info%ptr)
  end subroutine

  subroutine THUB_Info_set(info, key, value, ierror)
    interface
      integer(c_int) function c_info_set(info, key, value) bind(C, name="THUB_Info_set")
        import :: c_int, c_ptr, c_char
        type(c_ptr), value :: info
        character(kind=c_char), intent(in) :: key(*), value(*)
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    character(len=*), intent(in) :: key, value
    integer, intent(out) :: ierror
    ierror = c_info_set(info%ptr, cstr(key), cstr(value))
  end subroutine

  !> flag: whether key is set; value (untouched when not) is truncated to len(value).
  subroutine THUB_Info_get(info, key, value, flag, ierror)
    interface
      integer(c_int) function c_info_get(info, key, len, value, flag) bind(C, name="THUB_Info_get")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: info
        character(kind=c_char), intent(in) :: key(*)
        integer(c_size_t), value :: len
        character(kind=c_char), intent(inout) :: value(*)
        integer(c_int), intent(inout) :: flag
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    character(len=*), intent(in) :: key
    character(len=*), intent(inout) :: value
    logical, intent(out) :: flag
    integer, intent(out) :: ierror
    character(kind=c_char) :: buf(len(value) + 1)
    integer(c_int) :: f
    f = 0
    ierror = c_info_get(info%ptr, cstr(key), int(size(buf), c_size_t), buf, f)
    flag = ierror == THUB_SUCCESS .and. f /= 0
    if (flag) call copy_out(buf, value)
  end subroutine

  subroutine THUB_Info_get_valuelen(info, key, valuelen, flag, ierror)
    interface
      integer(c_int) function c_info_get_valuelen(info, key, valuelen, flag) bind(C, name="THUB_Info_get_valuelen")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: info
        character(kind=c_char), intent(in) :: key(*)
        integer(c_size_t), intent(inout) :: valuelen
        integer(c_int), intent(inout) :: flag
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    character(len=*), intent(in) :: key
    integer, intent(inout) :: valuelen
    logical, intent(out) :: flag
    integer, intent(out) :: ierror
    integer(c_size_t) :: n
    integer(c_int) :: f
    n = 0
    f = 0
    ierror = c_info_get_valuelen(info%ptr, cstr(key), n, f)
    flag = ierror == THUB_SUCCESS .and. f /= 0
    if (flag) valuelen = int(n)
  end subroutine

  subroutine THUB_Info_delete(info, key, ierror)
    interface
      integer(c_int) function c_info_delete(info, key) bind(C, name="THUB_Info_delete")
        import :: c_int, c_ptr, c_char
        type(c_ptr), value :: info
        character(kind=c_char), intent(in) :: key(*)
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    character(len=*), intent(in) :: key
    integer, intent(out) :: ierror
    ierror = c_info_delete(info%ptr, cstr(key))
  end subroutine

  subroutine THUB_Info_dup(info, newinfo, ierror)
    interface
      integer(c_int) function c_info_dup(info, newinfo) bind(C, name="THUB_Info_dup")
        import :: c_int, c_ptr
        type(c_ptr), value :: info
        type(c_ptr), intent(inout) :: newinfo
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    type(THUB_Info), intent(inout) :: newinfo
    integer, intent(out) :: ierror
    ierror = c_info_dup(info%ptr, newinfo%ptr)
  end subroutine

  subroutine THUB_Info_get_nkeys(info, nkeys, ierror)
    interface
      integer(c_int) function c_info_get_nkeys(info, nkeys) bind(C, name="THUB_Info_get_nkeys")
        import :: c_int, c_ptr
        type(c_ptr), value :: info
        integer(c_int), intent(inout) :: nkeys
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    integer, intent(inout) :: nkeys
    integer, intent(out) :: ierror
    integer(c_int) :: n
    n = 0
    ierror = c_info_get_nkeys(info%ptr, n)
    if (ierror == THUB_SUCCESS) nkeys = int(n)
  end subroutine

  !> The n-th key (0 <= n < nkeys, lexicographic order), truncated to len(key).
  subroutine THUB_Info_get_nthkey(info, n, key, ierror)
    interface
      integer(c_int) function c_info_get_nthkey(info, n, key, len) bind(C, name="THUB_Info_get_nthkey")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: info
        integer(c_int), value :: n
        character(kind=c_char), intent(inout) :: key(*)
        integer(c_size_t), value :: len
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    integer, intent(in) :: n
    character(len=*), intent(inout) :: key
    integer, intent(out) :: ierror
    character(kind=c_char) :: buf(len(key) + 1)
    ierror = c_info_get_nthkey(info%ptr, int(n, c_int), buf, int(size(buf), c_size_t))
    if (ierror == THUB_SUCCESS) call copy_out(buf, key)
  end subroutine

  subroutine THUB_Info_free(info, ierror)
    interface
      integer(c_int) function c_info_free(info) bind(C, name="THUB_Info_free")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: info
      end function
    end interface
    type(THUB_Info), intent(inout) :: info
    integer, intent(out) :: ierror
    ierror = c_info_free(info%ptr)
  end subroutine

  ! ---- library --------------------------------------------------------------------------

  subroutine THUB_Get_version(major, minor, patch, ierror)
    interface
      integer(c_int) function c_get_version(major, minor, patch) bind(C, name="THUB_Get_version")
        import :: c_int
        integer(c_int), intent(inout) :: major, minor, patch
      end function
    end interface
    integer, intent(inout) :: major, minor, patch
    integer, intent(out) :: ierror
    integer(c_int) :: a, b, c
    a = 0
    b = 0
    c = 0
    ierror = c_get_version(a, b, c)
    if (ierror /= THUB_SUCCESS) return
    major = int(a)
    minor = int(b)
    patch = int(c)
  end subroutine

  !> One line: the library's version, its UCX and CUDA; truncated to len(version).
  subroutine THUB_Get_library_version(version, ierror)
    interface
      integer(c_int) function c_get_library_version(buf, len) bind(C, name="THUB_Get_library_version")
        import :: c_int, c_char, c_size_t
        character(kind=c_char), intent(inout) :: buf(*)
        integer(c_size_t), value :: len
      end function
    end interface
    character(len=*), intent(inout) :: version
    integer, intent(out) :: ierror
    character(kind=c_char) :: buf(len(version) + 1)
    ierror = c_get_library_version(buf, int(size(buf), c_size_t))
    if (ierror == THUB_SUCCESS) call copy_out(buf, version)
  end subroutine

  ! ---- context --------------------------------------------------------------------------

  subroutine THUB_Init(info, ctx, ierror)
    interface
      integer(c_int) function c_init(info, ctx) bind(C, name="THUB_Init")
        import :: c_int, c_ptr
        type(c_ptr), value :: info
        type(c_ptr), intent(inout) :: ctx
      end function
    end interface
    type(THUB_Info), intent(in) :: info
    type(THUB_Context), intent(inout) :: ctx
    integer, intent(out) :: ierror
    ierror = c_init(info%ptr, ctx%ptr)
  end subroutine

  subroutine THUB_Finalize(ctx, ierror)
    interface
      integer(c_int) function c_finalize(ctx) bind(C, name="THUB_Finalize")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: ctx
      end function
    end interface
    type(THUB_Context), intent(inout) :: ctx
    integer, intent(out) :: ierror
    ierror = c_finalize(ctx%ptr)
  end subroutine

  !> `host:port`; THUB_ERR_ARG when it does not fit in address (as in C).
  subroutine THUB_Registry_address(ctx, address, ierror)
    interface
      integer(c_int) function c_registry_address(ctx, buf, len) bind(C, name="THUB_Registry_address")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: ctx
        character(kind=c_char), intent(inout) :: buf(*)
        integer(c_size_t), value :: len
      end function
    end interface
    type(THUB_Context), intent(in) :: ctx
    character(len=*), intent(inout) :: address
    integer, intent(out) :: ierror
    character(kind=c_char) :: buf(len(address) + 1)
    ierror = c_registry_address(ctx%ptr, buf, int(size(buf), c_size_t))
    if (ierror == THUB_SUCCESS) call copy_out(buf, address)
  end subroutine

  !> Host memory for tensors; c_f_pointer(baseptr, array, shape) makes it an array.
  subroutine THUB_Alloc_mem(ctx, bytes, info, baseptr, ierror)
    interface
      integer(c_int) function c_alloc_mem(ctx, bytes, info, baseptr) bind(C, name="THUB_Alloc_mem")
        import :: c_int, c_ptr, c_size_t
        type(c_ptr), value :: ctx
        integer(c_size_t), value :: bytes
        type(c_ptr), value :: info
        type(c_ptr), intent(inout) :: baseptr
      end function
    end interface
    type(THUB_Context), intent(in) :: ctx
    integer(c_size_t), intent(in) :: bytes
    type(THUB_Info), intent(in) :: info
    type(c_ptr), intent(inout) :: baseptr
    integer, intent(out) :: ierror
    ierror = c_alloc_mem(ctx%ptr, bytes, info%ptr, baseptr)
  end subroutine

  subroutine THUB_Free_mem(ctx, base, ierror)
    interface
      integer(c_int) function c_free_mem(ctx, base) bind(C, name="THUB_Free_mem")
        import :: c_int, c_ptr
        type(c_ptr), value :: ctx, base
      end function
    end interface
    type(THUB_Context), intent(in) :: ctx
    type(c_ptr), intent(in) :: base
    integer, intent(out) :: ierror
    ierror = c_free_mem(ctx%ptr, base)
  end subroutine

  ! ---- models ---------------------------------------------------------------------------

  subroutine THUB_Open(ctx, model, replica, shard, num_shards, info, m, ierror)
    interface
      integer(c_int) function c_open(ctx, model, replica, shard, num_shards, info, m) bind(C, name="THUB_Open")
        import :: c_int, c_ptr, c_char
        type(c_ptr), value :: ctx
        character(kind=c_char), intent(in) :: model(*), replica(*)
        integer(c_int), value :: shard, num_shards
        type(c_ptr), value :: info
        type(c_ptr), intent(inout) :: m
      end function
    end interface
    type(THUB_Context), intent(in) :: ctx
    character(len=*), intent(in) :: model, replica
    integer, intent(in) :: shard, num_shards
    type(THUB_Info), intent(in) :: info
    type(THUB_Model), intent(inout) :: m
    integer, intent(out) :: ierror
    ierror = c_open(ctx%ptr, cstr(model), cstr(replica), int(shard, c_int), int(num_shards, c_int), info%ptr, m%ptr)
  end subroutine

  !> addr: c_loc of the tensor's first element (a target), bytes: its size in bytes.
  subroutine THUB_Register(m, tensor, addr, bytes, memtype, ierror)
    interface
      integer(c_int) function c_register(m, tensor, addr, bytes, memtype) bind(C, name="THUB_Register")
        import :: c_int, c_ptr, c_char, c_size_t
        type(c_ptr), value :: m
        character(kind=c_char), intent(in) :: tensor(*)
        type(c_ptr), value :: addr
        integer(c_size_t), value :: bytes
        integer(c_int), value :: memtype
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    character(len=*), intent(in) :: tensor
    type(c_ptr), intent(in) :: addr
    integer(c_size_t), intent(in) :: bytes
    integer, intent(in) :: memtype
    integer, intent(out) :: ierror
    ierror = c_register(m%ptr, cstr(tensor), addr, bytes, int(memtype, c_int))
  end subroutine

  subroutine THUB_Publish(m, version, ierror)
    interface
      integer(c_int) function c_publish(m, version) bind(C, name="THUB_Publish")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), value :: m
        integer(c_int64_t), value :: version
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer(int64), intent(in) :: version
    integer, intent(out) :: ierror
    ierror = c_publish(m%ptr, version)
  end subroutine

  subroutine THUB_Replicate(m, version, got, ierror)
    interface
      integer(c_int) function c_replicate(m, version, got) bind(C, name="THUB_Replicate")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), value :: m
        integer(c_int64_t), value :: version
        integer(c_int64_t), intent(inout) :: got
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer(int64), intent(in) :: version
    integer(int64), intent(inout) :: got
    integer, intent(out) :: ierror
    ierror = c_replicate(m%ptr, version, got)
  end subroutine

  subroutine THUB_Ireplicate(m, version, request, ierror)
    interface
      integer(c_int) function c_ireplicate(m, version, req) bind(C, name="THUB_Ireplicate")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), value :: m
        integer(c_int64_t), value :: version
        type(c_ptr), intent(inout) :: req
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer(int64), intent(in) :: version
    type(THUB_Request), intent(inout) :: request
    integer, intent(out) :: ierror
    ierror = c_ireplicate(m%ptr, version, request%ptr)
  end subroutine

  subroutine THUB_Iupdate(m, version, request, ierror)
    interface
      integer(c_int) function c_iupdate(m, version, req) bind(C, name="THUB_Iupdate")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), value :: m
        integer(c_int64_t), value :: version
        type(c_ptr), intent(inout) :: req
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer(int64), intent(in) :: version
    type(THUB_Request), intent(inout) :: request
    integer, intent(out) :: ierror
    ierror = c_iupdate(m%ptr, version, request%ptr)
  end subroutine

  subroutine THUB_Iunpublish(m, request, ierror)
    interface
      integer(c_int) function c_iunpublish(m, req) bind(C, name="THUB_Iunpublish")
        import :: c_int, c_ptr
        type(c_ptr), value :: m
        type(c_ptr), intent(inout) :: req
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    type(THUB_Request), intent(inout) :: request
    integer, intent(out) :: ierror
    ierror = c_iunpublish(m%ptr, request%ptr)
  end subroutine

  !> ierror THUB_NOT_UPDATED (> 0, not an error): nothing newer; got keeps the held version.
  subroutine THUB_Update(m, version, got, ierror)
    interface
      integer(c_int) function c_update(m, version, got) bind(C, name="THUB_Update")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), value :: m
        integer(c_int64_t), value :: version
        integer(c_int64_t), intent(inout) :: got
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer(int64), intent(in) :: version
    integer(int64), intent(inout) :: got
    integer, intent(out) :: ierror
    ierror = c_update(m%ptr, version, got)
  end subroutine

  subroutine THUB_Unpublish(m, ierror)
    interface
      integer(c_int) function c_unpublish(m) bind(C, name="THUB_Unpublish")
        import :: c_int, c_ptr
        type(c_ptr), value :: m
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    integer, intent(out) :: ierror
    ierror = c_unpublish(m%ptr)
  end subroutine

  subroutine THUB_Close(m, ierror)
    interface
      integer(c_int) function c_close(m) bind(C, name="THUB_Close")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: m
      end function
    end interface
    type(THUB_Model), intent(inout) :: m
    integer, intent(out) :: ierror
    ierror = c_close(m%ptr)
  end subroutine

  subroutine THUB_Model_stat(m, key, value, ierror)
    interface
      integer(c_int) function c_model_stat(m, key, value) bind(C, name="THUB_Model_stat")
        import :: c_int, c_ptr, c_char, c_int64_t
        type(c_ptr), value :: m
        character(kind=c_char), intent(in) :: key(*)
        integer(c_int64_t), intent(inout) :: value
      end function
    end interface
    type(THUB_Model), intent(in) :: m
    character(len=*), intent(in) :: key
    integer(int64), intent(inout) :: value
    integer, intent(out) :: ierror
    ierror = c_model_stat(m%ptr, cstr(key), value)
  end subroutine

  ! ---- nonblocking requests -------------------------------------------------------------

  !> done: whether it finished (then request is THUB_REQUEST_NULL and ierror its status).
  subroutine THUB_Test(request, done, got, ierror)
    interface
      integer(c_int) function c_test(req, done, got) bind(C, name="THUB_Test")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), intent(inout) :: req
        integer(c_int), intent(inout) :: done
        integer(c_int64_t), intent(inout) :: got
      end function
    end interface
    type(THUB_Request), intent(inout) :: request
    logical, intent(out) :: done
    integer(int64), intent(inout) :: got
    integer, intent(out) :: ierror
    integer(c_int) :: d
    d = 0
    ierror = c_test(request%ptr, d, got)
    done = d /= 0
  end subroutine

  subroutine THUB_Wait(request, got, ierror)
    interface
      integer(c_int) function c_wait(req, got) bind(C, name="THUB_Wait")
        import :: c_int, c_ptr, c_int64_t
        type(c_ptr), intent(inout) :: req
        integer(c_int64_t), intent(inout) :: got
      end function
    end interface
    type(THUB_Request), intent(inout) :: request
    integer(int64), intent(inout) :: got
    integer, intent(out) :: ierror
    ierror = c_wait(request%ptr, got)
  end subroutine

  !> Waits for requests(1:count); gots(i) and statuses(i) per request (gots(i) = -1 on error).
  subroutine THUB_Waitall(count, requests, gots, statuses, ierror)
    interface
      integer(c_int) function c_waitall(count, reqs, gots, statuses) bind(C, name="THUB_Waitall")
        import :: c_int, c_ptr, c_int64_t
        integer(c_int), value :: count
        type(c_ptr), intent(inout) :: reqs(*)
        integer(c_int64_t), intent(inout) :: gots(*)
        integer(c_int), intent(inout) :: statuses(*)
      end function
    end interface
    integer, intent(in) :: count
    type(THUB_Request), intent(inout) :: requests(:)
    integer(int64), intent(inout) :: gots(:)
    integer, intent(inout) :: statuses(:)
    integer, intent(out) :: ierror
    type(c_ptr) :: reqs(max(count, 1))
    integer(c_int64_t) :: g(max(count, 1))
    integer(c_int) :: s(max(count, 1))
    if (count < 0 .or. count > size(requests) .or. count > size(gots) .or. count > size(statuses)) then
      ierror = THUB_ERR_ARG
      return
    end if
    if (count == 0) then
      ierror = THUB_SUCCESS
      return
    end if
    reqs = requests(1:count)%ptr
    s = -huge(0_c_int)   ! THUB_Waitall writes every status unless it waited for nothing
    ierror = c_waitall(int(count, c_int), reqs, g, s)
    requests(1:count)%ptr = reqs
    if (s(1) == -huge(0_c_int)) return
    gots(1:count) = g
    statuses(1:count) = int(s)
  end subroutine

  !> index: the finished request's position in requests (1-based), 0 when none finished;
  !> done: one finished, or none of them is active.
  subroutine THUB_Testany(count, requests, index, done, got, ierror)
    interface
      integer(c_int) function c_testany(count, reqs, index, done, got) bind(C, name="THUB_Testany")
        import :: c_int, c_ptr, c_int64_t
        integer(c_int), value :: count
        type(c_ptr), intent(inout) :: reqs(*)
        integer(c_int), intent(inout) :: index, done
        integer(c_int64_t), intent(inout) :: got
      end function
    end interface
    integer, intent(in) :: count
    type(THUB_Request), intent(inout) :: requests(:)
    integer, intent(inout) :: index
    logical, intent(out) :: done
    integer(int64), intent(inout) :: got
    integer, intent(out) :: ierror
    type(c_ptr) :: reqs(max(count, 1))
    integer(c_int) :: i, d
    done = .false.
    if (count < 0 .or. count > size(requests)) then
      ierror = THUB_ERR_ARG
      return
    end if
    if (count > 0) reqs(1:count) = requests(1:count)%ptr
    i = -1
    d = 0
    ierror = c_testany(int(count, c_int), reqs, i, d, got)
    if (count > 0) requests(1:count)%ptr = reqs(1:count)
    if (ierror == THUB_ERR_ARG .and. d == 0) return
    done = d /= 0
    index = int(i) + 1
  end subroutine

  subroutine THUB_Request_free(request, ierror)
    interface
      integer(c_int) function c_request_free(req) bind(C, name="THUB_Request_free")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: req
      end function
    end interface
    type(THUB_Request), intent(inout) :: request
    integer, intent(out) :: ierror
    ierror = c_request_free(request%ptr)
  end subroutine

  !> Complete the request with THUB_Wait or THUB_Test as usual (THUB_ERR_CANCELED if it took effect).
  subroutine THUB_Cancel(request, ierror)
    interface
      integer(c_int) function c_cancel(req) bind(C, name="THUB_Cancel")
        import :: c_int, c_ptr
        type(c_ptr), intent(inout) :: req
      end function
    end interface
    type(THUB_Request), intent(inout) :: request
    integer, intent(out) :: ierror
    ierror = c_cancel(request%ptr)
  end subroutine
end module tensorhub
