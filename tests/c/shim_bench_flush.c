/* What holding no descriptor costs the shim per flush (docs/shim.md,
 * "Descriptors"): one 16 KiB append on a held O_APPEND descriptor against
 * open + writev + close per append, and one 16 KiB datagram on a held socket
 * against socket + sendmsg + close per datagram. Three rounds, mean ns.
 *
 *   cc -O2 -o /tmp/bench_flush tests/c/shim_bench_flush.c
 *   /tmp/bench_flush /dev/shm/flush.trace 5000 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  const char*path=argv[1]; int n=atoi(argv[2]); static char buf[16384]; memset(buf,1,sizeof buf);
  struct iovec iov={buf,sizeof buf};
  for(int round=0;round<3;round++){
  unlink(path); int fd=open(path,O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC,0644); close(fd);
  fd=open(path,O_WRONLY|O_APPEND|O_CLOEXEC);
  double t0=now(); for(int i=0;i<n;i++) writev(fd,&iov,1); double t1=now(); close(fd);
  unlink(path); fd=open(path,O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC,0644); close(fd);
  double t2=now(); for(int i=0;i<n;i++){int f=open(path,O_WRONLY|O_APPEND|O_CLOEXEC); writev(f,&iov,1); close(f);} double t3=now();
  /* socket */
  struct sockaddr_un a={.sun_family=AF_UNIX}; snprintf(a.sun_path,sizeof a.sun_path,"%s.sock",path); unlink(a.sun_path);
  int rx=socket(AF_UNIX,SOCK_DGRAM,0); bind(rx,(void*)&a,sizeof a); int sz=1<<24; setsockopt(rx,SOL_SOCKET,SO_RCVBUF,&sz,sizeof sz);
  int s=socket(AF_UNIX,SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK,0); char rb[20000];
  struct msghdr m={.msg_name=&a,.msg_namelen=sizeof a,.msg_iov=&iov,.msg_iovlen=1};
  double s1=0,s2=0;
  for(int i=0;i<n;i++){double x=now(); sendmsg(s,&m,MSG_DONTWAIT); s1+=now()-x; recv(rx,rb,sizeof rb,0);}
  for(int i=0;i<n;i++){double x=now(); int f=socket(AF_UNIX,SOCK_DGRAM|SOCK_CLOEXEC,0); sendmsg(f,&m,MSG_DONTWAIT); close(f); s2+=now()-x; recv(rx,rb,sizeof rb,0);}
  printf("%-14s held fd %6.0f ns  open-append-close %6.0f ns  (+%4.0f)  | socket held %6.0f ns  per flush %6.0f ns (+%4.0f)\n",path,(t1-t0)/n,(t3-t2)/n,(t3-t2-(t1-t0))/n,s1/n,s2/n,(s2-s1)/n);
  close(s); close(rx); unlink(a.sun_path);}
  unlink(path); return 0;}
