#ifndef DATALIB_H
#define DATALIB_H
#ifdef __cplusplus
extern "C" {
#endif
int datalib_runtime_version(void);
int datalib_scale(float *host, float a, int n);
#ifdef __cplusplus
}
#endif
#endif
