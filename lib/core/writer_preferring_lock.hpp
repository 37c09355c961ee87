// A reader-writer lock that lets a waiting writer in ahead of new readers. The books are read on
// every copy, for as long as the copy runs, and std::shared_mutex on glibc lets readers in first:
// a steady stream of copies could then keep a map, unmap or free waiting for ever.
#pragma once

#include <pthread.h>

namespace hipxx::core {

class WriterPreferringLock {
 public:
  WriterPreferringLock() noexcept {
    pthread_rwlockattr_t attributes;
    pthread_rwlockattr_init(&attributes);
    pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attributes);
    pthread_rwlockattr_destroy(&attributes);
  }
  WriterPreferringLock(const WriterPreferringLock&) = delete;
  WriterPreferringLock& operator=(const WriterPreferringLock&) = delete;
  ~WriterPreferringLock() { pthread_rwlock_destroy(&lock_); }

  // Not recursive: a thread holding it shared must not take it shared again while a writer waits.
  void lock() noexcept { pthread_rwlock_wrlock(&lock_); }
  bool try_lock() noexcept { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void unlock() noexcept { pthread_rwlock_unlock(&lock_); }
  void lock_shared() noexcept { pthread_rwlock_rdlock(&lock_); }
  bool try_lock_shared() noexcept { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() noexcept { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace hipxx::core
