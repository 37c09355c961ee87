/* Preloaded into an example run as a test: the application's signals, as a profiler or a timer of
 * its own sends them, with a handler installed without SA_RESTART, so that a blocking system call
 * of the program's returns EINTR. SIGALRM every 200 us of real time, in the process and in every
 * child it forks (which does not inherit the timer). For the examples that fork without exec. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>

static void ignore_signal(int signal_number) { (void)signal_number; }

static void start_interrupting(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = ignore_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGALRM, &action, NULL);
  sigset_t alarm_only;
  sigemptyset(&alarm_only);
  sigaddset(&alarm_only, SIGALRM);
  pthread_sigmask(SIG_UNBLOCK, &alarm_only, NULL);
  const struct itimerval every = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &every, NULL);
}

__attribute__((constructor)) static void on_load(void) {
  start_interrupting();
  pthread_atfork(NULL, NULL, start_interrupting);
}
