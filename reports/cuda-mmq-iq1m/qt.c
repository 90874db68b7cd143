#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int type = atoi(argv[1]); long n = atol(argv[2]); const char*out=argc>3?argv[3]:NULL;
  float*x=malloc(n*4); srand(1); for(long i=0;i<n;i++) x[i]=2.0f*rand()/RAND_MAX-1.0f;
  size_t rs=ggml_row_size(type,n); void*q=malloc(rs);
  float*im=malloc(256*4); for(int i=0;i<256;i++) im[i]=1.0f;
  ggml_quantize_init(type);
  double t0=now(); ggml_quantize_chunk(type,x,q,0,n/256,256,im); double t1=now();
  printf("type %d n %ld: %.3f s, %.1f ns/weight\n",type,n,t1-t0,(t1-t0)/n*1e9);
  if(out){ float*y=malloc(n*4); ggml_get_type_traits(type)->to_float(q,y,n);
    FILE*f=fopen(out,"wb"); fwrite(q,1,rs,f); fclose(f);
    char fn[256]; snprintf(fn,256,"%s.f32",out); f=fopen(fn,"wb"); fwrite(y,4,n,f); fclose(f);
    snprintf(fn,256,"%s.x",out); f=fopen(fn,"wb"); fwrite(x,4,n,f); fclose(f);}
  return 0;}
