/* Public interface of the Fuzzball node runtime (libfbrt), called from Python via cffi. */
#ifndef FBRT_H
#define FBRT_H

/* Version of the C runtime's ABI; bumped when a signature below changes. */
int fbrt_abi_version(void);

#endif
