#ifndef ARBOR_CSWIFTRUNTIME_SHIM_H
#define ARBOR_CSWIFTRUNTIME_SHIM_H

/// The Swift runtime's `swift_tryRetain` (swift/Runtime/HeapObject.h, exported with the C calling
/// convention by every Swift runtime): atomically counts a strong reference to the native Swift
/// object at `object` unless it has begun to end, and returns the object, or NULL. It is what
/// loading a `weak` reference does, without the side table a weak reference gives the object.
/// The object's memory must still be allocated (an `unowned` reference keeps it).
///
/// Arbor's object registry loads its entries through it (Sources/Arbor/Context/ObjectRegistry.swift):
/// the last reference to a managed object may go on any thread while its context reads its entry.
#ifdef __cplusplus
extern "C" {
#endif
void *_Nullable swift_tryRetain(void *_Nonnull object);
#ifdef __cplusplus
}
#endif

#endif
