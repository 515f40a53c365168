#include "fbrt.h"

int fbrt_abi_version(void) { return FBRT_ABI_VERSION; }
