#include "fbrt.h"

int fbrt_abi_version(void) { return 2; }
