// Uses a private-queue context outside `perform`: a build with Arbor's queue checks stops here
// ("Arbor concurrency violation: hasChanges called on context "probe" outside its private
// queue"); one without them goes on and says so. `make check-dependent` runs it both ways.
import Arbor

let context = ManagedObjectContext(concurrencyType: .privateQueue)
context.name = "probe"
_ = context.hasChanges
print("Arbor's queue checks are off: a context used outside its queue did not stop the program")
