/// An in-place sort that allocates nothing, for the timer queue's bursts.
///
/// The standard library's `sort` is stable: it allocates a buffer of half the elements and merges through it. For a
/// burst of half a million timer entries that buffer is 8 MB of fresh pages, and the merges move every entry about
/// twenty times. The queue's keys are unique (`TimerEntry.push` never repeats), so stability buys nothing there.
extension UnsafeMutableBufferPointer {
    /// Sorts the elements in place by `precedes` (a strict weak ordering), not stably: introsort, that is quicksort
    /// with a median-of-three pivot, insertion sort for short ranges, and heapsort for a range that quicksort has
    /// split more than `2 log₂ n` times, so that no input costs more than O(*n* log *n*).
    ///
    /// - Complexity: O(*n* log *n*); no allocation.
    func sortUnstably(by precedes: (Element, Element) -> Bool) {
        let depthLimit = 2 * (Int.bitWidth - self.count.leadingZeroBitCount)
        self.sortUnstably(by: precedes, depthLimit: depthLimit)
    }

    /// `sortUnstably(by:)` with the number of quicksort splits allowed before heapsort takes over; tests pass 0 to
    /// reach the heapsort.
    func sortUnstably(by precedes: (Element, Element) -> Bool, depthLimit: Int) {
        guard self.count > 1, let base = self.baseAddress else { return }
        Self.introsort(base, low: 0, high: self.count, depthLimit: depthLimit, precedes)
    }

    /// Ranges this short are insertion-sorted: fewer moves than partitioning them.
    private static var insertionSortMaximum: Int { 16 }

    /// Sorts `base[low..<high]`. Recurses into the shorter part of each split and loops on the longer one, so the
    /// stack stays O(log *n*) deep.
    private static func introsort(_ base: UnsafeMutablePointer<Element>, low: Int, high: Int, depthLimit: Int,
                                  _ precedes: (Element, Element) -> Bool) {
        var low = low
        var high = high
        var depthLimit = depthLimit
        while high - low > Self.insertionSortMaximum {
            guard depthLimit > 0 else {
                Self.heapsort(base, low: low, high: high, precedes)
                return
            }
            depthLimit -= 1
            let split = Self.partition(base, low: low, high: high, precedes)
            if split - low < high - split {
                Self.introsort(base, low: low, high: split, depthLimit: depthLimit, precedes)
                low = split
            } else {
                Self.introsort(base, low: split, high: high, depthLimit: depthLimit, precedes)
                high = split
            }
        }
        Self.insertionSort(base, low: low, high: high, precedes)
    }

    /// Hoare's partition of `base[low..<high]` (at least 3 elements) around the median of its first, middle and last
    /// elements. Returns `split`, with `low < split < high`: no element of `low..<split` follows one of
    /// `split..<high`.
    private static func partition(_ base: UnsafeMutablePointer<Element>, low: Int, high: Int,
                                  _ precedes: (Element, Element) -> Bool) -> Int {
        let last = high - 1
        let middle = low + (last - low) / 2
        // Orders the three, so that the first and last bound both scans below.
        if precedes(base[middle], base[low]) { swap(&base[middle], &base[low]) }
        if precedes(base[last], base[middle]) {
            swap(&base[last], &base[middle])
            if precedes(base[middle], base[low]) { swap(&base[middle], &base[low]) }
        }
        let pivot = base[middle]
        var left = low - 1
        var right = high
        while true {
            repeat { left += 1 } while precedes(base[left], pivot)
            repeat { right -= 1 } while precedes(pivot, base[right])
            if left >= right { return right + 1 }
            swap(&base[left], &base[right])
        }
    }

    private static func insertionSort(_ base: UnsafeMutablePointer<Element>, low: Int, high: Int,
                                      _ precedes: (Element, Element) -> Bool) {
        guard high - low > 1 else { return }
        for index in (low + 1)..<high {
            let element = base[index]
            var hole = index
            while hole > low, precedes(element, base[hole - 1]) {
                base[hole] = base[hole - 1]
                hole -= 1
            }
            base[hole] = element
        }
    }

    private static func heapsort(_ base: UnsafeMutablePointer<Element>, low: Int, high: Int,
                                 _ precedes: (Element, Element) -> Bool) {
        let heap = base + low
        let count = high - low
        var index = count / 2
        while index > 0 {
            index -= 1
            Self.siftDown(heap, from: index, count: count, precedes)
        }
        var end = count
        while end > 1 {
            end -= 1
            swap(&heap[0], &heap[end])
            Self.siftDown(heap, from: 0, count: end, precedes)
        }
    }

    /// Restores a max-heap (by `precedes`) below `start` in `heap[0..<count]`.
    private static func siftDown(_ heap: UnsafeMutablePointer<Element>, from start: Int, count: Int,
                                 _ precedes: (Element, Element) -> Bool) {
        var parent = start
        let element = heap[parent]
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count, precedes(heap[child], heap[child + 1]) {
                child += 1
            }
            guard precedes(element, heap[child]) else { break }
            heap[parent] = heap[child]
            parent = child
        }
        heap[parent] = element
    }
}
