"""Documented exceptions for the abi-vs-amd test.

The reference header is Debian 12's libamdhip64-dev (ROCm 5.2.3). AMD changed
parts of the ABI after that release; hipxx follows the newest AMD headers
(shared/spec/hip-abi.md: "Where two releases differ, follow the newest").
Every entry below is a place where ROCm 5.2 and current AMD headers differ.

Nothing here is skipped: for each ALLOWED key the test asserts that hipxx's
value equals the CURRENT value written here (taken from the spec or from the
current AMD header, as cited). The ROCm 5.2 value is printed for information.
An entry whose key is missing from hipxx's header is a failure.

Key syntax (shared with abi_compare.py):
  enum:NAME                 value of an enumerator
  macro:NAME                value of an object-like macro
  sizeof:TYPE / alignof:TYPE
  offsetof:TYPE:FIELD.PATH  byte offset of a (possibly nested) field
  fieldsize:TYPE:FIELD.PATH sizeof of that field
  proto:FUNCTION            normalised C prototype (gcc -aux-info)
"""

# key -> (current value, reason). Values for proto: keys are strings.
ALLOWED = {
    # --- hipMemAllocationProp ------------------------------------------------
    # ROCm 5.2: { unsigned char compressionType; hipMemLocation location;
    # hipMemAllocationHandleType requestedHandleType; hipMemAllocationType type;
    # unsigned short usage; void* win32HandleMetaData; }.
    # ROCm 6+: { type; requestedHandleType (ROCm 7: union with
    # requestedHandleTypes); location; win32HandleMetaData;
    # struct { compressionType; gpuDirectRDMACapable; usage } allocFlags }.
    # Spec, "Structs": hipMemAllocationProp. The size (32) did not change and
    # is compared normally.
    "offsetof:hipMemAllocationProp:type": (0, "spec: field order changed after ROCm 5.2"),
    "offsetof:hipMemAllocationProp:requestedHandleType": (4, "spec: field order changed after ROCm 5.2"),
    "offsetof:hipMemAllocationProp:location": (8, "spec: field order changed after ROCm 5.2"),
    "offsetof:hipMemAllocationProp:win32HandleMetaData": (16, "spec: field order changed after ROCm 5.2"),
    # 5.2's top-level compressionType/usage became allocFlags.compressionType /
    # allocFlags.usage (compared through RENAMED below).
    "offsetof:hipMemAllocationProp:allocFlags.compressionType": (24, "spec: moved into allocFlags after ROCm 5.2"),
    "offsetof:hipMemAllocationProp:allocFlags.usage": (26, "spec: moved into allocFlags after ROCm 5.2"),

    # --- hipMemPoolProps ------------------------------------------------------
    # ROCm 5.2: ...; void* win32SecurityAttributes; unsigned char reserved[64].
    # Current: ...; void* win32SecurityAttributes; size_t maxSize;
    # unsigned char reserved[56]. Spec, "Structs": hipMemPoolProps. Total size
    # (88) unchanged and compared normally.
    "offsetof:hipMemPoolProps:reserved": (32, "spec: maxSize inserted before reserved"),
    "fieldsize:hipMemPoolProps:reserved": (56, "spec: reserved shrank from 64 to 56"),

    # --- hipMemoryType ----------------------------------------------------------
    # ROCm 5.2: Host=0, Device=1, Array=2, Unified=3 (implicit numbering).
    # Spec, "Enums": Unregistered=0, Host=1, Device=2, Managed=3, Array=10,
    # Unified=11 (renumbered in ROCm 6.0).
    "enum:hipMemoryTypeHost": (1, "spec: hipMemoryType renumbered in ROCm 6"),
    "enum:hipMemoryTypeDevice": (2, "spec: hipMemoryType renumbered in ROCm 6"),
    "enum:hipMemoryTypeArray": (10, "spec: hipMemoryType renumbered in ROCm 6"),
    "enum:hipMemoryTypeUnified": (11, "spec: hipMemoryType renumbered in ROCm 6"),

    # --- hipErrorTbd -------------------------------------------------------------
    # AMD declares it without a value, as "last code + 1": 1054 in ROCm 5.2-6.x;
    # ROCm 7 added hipErrorInvalidClusterSize = 1054, so it is 1055 now
    # (current AMD hip_runtime_api.h).
    "enum:hipErrorTbd": (1055, "current AMD header: placeholder after hipErrorInvalidClusterSize"),

    # --- Flag macros -------------------------------------------------------------
    # ROCm 5.2 defined it as 0; current headers and the spec ("Flag macros")
    # define hipIpcMemLazyEnablePeerAccess as 0x1.
    "macro:hipIpcMemLazyEnablePeerAccess": (1, "spec: value changed from 0 to 0x1"),

    # --- Version macros ------------------------------------------------------------
    # Not ABI: hipxx advertises the HIP API level it implements (6.3), while
    # the reference package is 5.2.21153. Asserted so a change is deliberate.
    "macro:HIP_VERSION_MAJOR": (6, "hipxx implements the ROCm 6.3-era API"),
    "macro:HIP_VERSION_MINOR": (3, "hipxx implements the ROCm 6.3-era API"),
    "macro:HIP_VERSION_PATCH": (0, "hipxx implements the ROCm 6.3-era API"),
    "macro:HIP_VERSION": (60300000, "6 * 10^7 + 3 * 10^5 + 0, AMD's packing"),
}

# Same entity, different spelling. hipxx key -> ROCm 5.2 key. The two values
# are compared as if the names matched (and ALLOWED applies on top).
RENAMED = {
    # Spec, "Structs": hipPointerAttribute_t's first field is `type`
    # (ROCm 5.2: `memoryType`; renamed in ROCm 6.0).
    "offsetof:hipPointerAttribute_t:type": "offsetof:hipPointerAttribute_t:memoryType",
    "fieldsize:hipPointerAttribute_t:type": "fieldsize:hipPointerAttribute_t:memoryType",
    # hipMemAllocationProp: see ALLOWED above.
    "offsetof:hipMemAllocationProp:allocFlags.compressionType": "offsetof:hipMemAllocationProp:compressionType",
    "fieldsize:hipMemAllocationProp:allocFlags.compressionType": "fieldsize:hipMemAllocationProp:compressionType",
    "offsetof:hipMemAllocationProp:allocFlags.usage": "offsetof:hipMemAllocationProp:usage",
    "fieldsize:hipMemAllocationProp:allocFlags.usage": "fieldsize:hipMemAllocationProp:usage",
    # Retired device attributes: current headers call the slots Unused1..5.
    "enum:hipDeviceAttributeUnused1": "enum:hipDeviceAttributeName",
    "enum:hipDeviceAttributeUnused2": "enum:hipDeviceAttributeUuid",
    "enum:hipDeviceAttributeUnused3": "enum:hipDeviceAttributeArch",
    "enum:hipDeviceAttributeUnused4": "enum:hipDeviceAttributeGcnArch",
    "enum:hipDeviceAttributeUnused5": "enum:hipDeviceAttributeGcnArchName",
}
